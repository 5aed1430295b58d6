#!/usr/bin/env python3
"""Checks fleet's state after a fault (tests/faults/lib.sh). Prints one line
per broken invariant and exits 1 if there is any; exits 0 silently.

  state_check.py STATE [--before SNAPSHOT] [--log APPLY_OUTPUT]
                 [--unlocked NODE]... [--addresses FILE]

- the state file parses (an absent file is no state yet: fine);
- --before: every address the snapshot held is still there and the serial
  did not go back (nothing finished is lost);
- --log: every "ADDR: complete after" line fleet printed before the fault
  is in the state, unless the step removed it ("ADDR: Destroying...") or
  a rollback undid it ("ADDR: rolled back") in the same log;
- --unlocked NODE: the node's display RAM is not at its boot default, so
  the state must hold display_ram.NODE with the original values recorded;
- --has ADDR: the state must hold ADDR (what a converged apply made);
- --addresses FILE: write the state's addresses there (one a line), for a
  later --before.
"""
import argparse
import json
import os
import re
import sys


def load(path):
    with open(path) as f:
        return json.load(f)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("state")
    ap.add_argument("--before", default="")
    ap.add_argument("--log", default="")
    ap.add_argument("--unlocked", action="append", default=[])
    ap.add_argument("--addresses", default="")
    ap.add_argument("--has", action="append", default=[])
    a = ap.parse_args()

    bad = []
    if not os.path.exists(a.state):
        st = {"serial": 0, "resources": []}
    else:
        try:
            st = load(a.state)
        except Exception as e:  # noqa: BLE001 - any parse failure is the finding
            print("state does not parse: %s" % e)
            return 1
    addrs = {r["address"]: r for r in st.get("resources", [])}

    if a.before and os.path.exists(a.before):
        before = load(a.before)
        for r in before.get("resources", []):
            if r["address"] not in addrs:
                bad.append("lost from state: %s" % r["address"])
        if st.get("serial", 0) < before.get("serial", 0):
            bad.append("serial went back: %s -> %s" % (before.get("serial"), st.get("serial")))

    if a.log and os.path.exists(a.log):
        text = open(a.log, errors="replace").read()
        removed = set(re.findall(r"^(\S+): (?:Destroying|rolled back)", text, re.M))
        for addr in re.findall(r"^(\S+): complete after", text, re.M):
            if addr not in addrs and addr not in removed:
                bad.append("finished but not in state: %s" % addr)

    for node in a.unlocked:
        rec = addrs.get("display_ram.%s" % node)
        if rec is None or not (rec.get("attributes") or {}).get("original"):
            bad.append("display RAM of %s not at its default and unrecorded" % node)

    for addr in a.has:
        if addr not in addrs:
            bad.append("%s is on its node but not in the state" % addr)

    if a.addresses:
        with open(a.addresses, "w") as f:
            f.write("".join(x + "\n" for x in sorted(addrs)))
    for b in bad:
        print(b)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
