#!/usr/bin/env python3
"""The one filter golden_test.sh runs over everything it keeps: replaces
what differs from run to run with stable placeholders and keeps every
other byte as it is.

  normalize.py --sim SIMDIR --work WORK --root ROOT <in >out

Two kinds of replacement, in this order:

1. Known values, by name (they say which node or role they belong to):
   the test's temp dir (<work>), the source tree (<root>), the sim's random
   user prefix (<prefix>: node users are <prefix>dgx1 ...), each node's
   machine-id and simulated GPU uuid (<machine-id:dgx1>, <gpu-uuid:dgx2>),
   and the sha256 of the tree's src/probe/fleet_probe.cc
   (<fleet-probe-source>): the probe@node step records it, and it changes
   with every edit of the probe, which is not what these files guard; a
   recorded hash that is not the tree's still shows as a difference.
   Ports are NOT replaced: the test runs in a network namespace of its own
   with fixed ports.

2. Volatile values found by pattern, numbered per kind in order of first
   appearance in the file (<uuid1>, <uuid2>, ... ; the same value gets the
   same placeholder everywhere in the file, so equality is still checked):
   UUIDs (the state's lineage, boot ids: <uuidN>), the 64-hex ids podman
   gives containers (<containerN>: only as the value of a container_id key,
   in JSON or in plan text), host key fingerprints (<hostkeyN>), byte rates
   (<rateN>), the sha256 of fleet.yaml in a plan's sources (<fleet-yamlN>:
   fleet.yaml holds the sim's users and paths). RFC 3339 timestamps all become <time>, unnumbered: whether two
   steps finish within the same second is chance, not behaviour.

Fixed figures stay: timeouts ("timeout 10 s") are configuration, not timing.

Image and blob digests are NOT replaced: the test's images and models are
built reproducibly, so their digests are part of what is compared.
"""
import argparse
import hashlib
import json
import os
import re
import sys


class Numbering:
    """Maps each distinct value of a kind to <kindN>, N by first appearance."""

    def __init__(self):
        self.seen = {}

    def __call__(self, kind, value):
        table = self.seen.setdefault(kind, {})
        if value not in table:
            table[value] = "<%s%d>" % (kind, len(table) + 1)
        return table[value]


def read(path):
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return ""


def known_values(args):
    """(value, placeholder) for everything named in the sim."""
    out = [(args.work, "<work>"), (args.root, "<root>")]
    probe_source = os.path.join(args.root, "src", "probe", "fleet_probe.cc")
    with open(probe_source, "rb") as f:
        out.append((hashlib.sha256(f.read()).hexdigest(), "<fleet-probe-source>"))
    sim = json.load(open(os.path.join(args.sim, "sim.json")))
    if sim.get("prefix"):
        out.append((sim["prefix"], "<prefix>"))
    for n in sim["nodes"]:
        name = n["name"]
        nd = os.path.join(args.sim, "nodes", name)
        for path, what in ((os.path.join(nd, "machine-id"), "machine-id"),
                           (os.path.join(n["root"], "sim", "gpu_uuid"), "gpu-uuid")):
            value = read(path)
            if value:
                out.append((value, "<%s:%s>" % (what, name)))
    return [v for v in out if v[0]]


def replace_known(text, values):
    # Longest first: the work dir holds the sim dir.
    for value, name in sorted(values, key=lambda v: -len(v[0])):
        text = text.replace(value, name)
    return text


HEX64 = r"[0-9a-f]{64}"
PATTERNS = [
    # kind, regex, group holding the volatile part (0: the whole match)
    ("uuid", r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}", 0),
    ("container", r'"container_id": "(%s)"' % HEX64, 1),
    ("container", r'container_id = "(%s)"' % HEX64, 1),
    ("hostkey", r"SHA256:[A-Za-z0-9+/]{43}", 0),
    # fleet.yaml names the sim's ports, users and temp dirs, so its sha256 in
    # a plan's "sources" differs run to run (the recipes' hashes do not).
    ("fleet-yaml", r'"fleet.yaml": "sha256:(%s)"' % HEX64, 1),
    ("rate", r"(?<![\w.])\d+(?:\.\d+)? ?[KMGT]?i?B/s", 0),
]
UNNUMBERED = [("<time>", r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:?\d\d)?")]


def replace_patterns(text):
    for name, pattern in UNNUMBERED:
        text = re.sub(pattern, name, text)
    number = Numbering()
    for kind, pattern, group in PATTERNS:
        def sub(m, kind=kind, group=group):
            whole = m.group(0)
            if group == 0:
                return number(kind, whole)
            start, end = m.start(group) - m.start(0), m.end(group) - m.start(0)
            return whole[:start] + number(kind, m.group(group)) + whole[end:]
        text = re.sub(pattern, sub, text)
    return text


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sim", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--root", required=True)
    args = ap.parse_args()
    text = sys.stdin.read()
    sys.stdout.write(replace_patterns(replace_known(text, known_values(args))))


if __name__ == "__main__":
    main()
