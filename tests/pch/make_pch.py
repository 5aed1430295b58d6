#!/usr/bin/env python3
"""make_pch.py HEADER COMPILE_COMMANDS OUT_H OUT_GCH DEPFILE: OUT_GCH, GCC's
precompiled OUT_H (a copy of HEADER), built with exactly the flags the unit
tests' translation units are compiled with.

The flags come from meson's compile_commands.json (the entry of a test that
includes OUT_H), so they match whatever the build folder was configured with
(optimization, debug, a cross compiler, defines): GCC uses a .gch only when
they do, and otherwise (-Winvalid-pch warns) parses the header as text.
compile_commands.json is rewritten on every reconfigure: when the command and
the header are what built the current .gch, nothing is written, and ninja
(restat) recompiles no test.
"""
import json
import os
import shlex
import shutil
import subprocess
import sys


def test_command(compdb_path, out_h):
    with open(compdb_path) as f:
        entries = json.load(f)
    users = [e for e in entries if out_h in e["command"]]
    if not users:
        sys.exit(f"make_pch.py: no entry in {compdb_path} includes {out_h}")
    # One fixed test, so that another test's own defines do not move the flags.
    users.sort(key=lambda e: ("status_test" not in e["file"], e["file"]))
    return users[0]


def pch_command(entry, out_h, out_gch, depfile):
    args = shlex.split(entry["command"])
    kept = []
    skip = 0
    for i, a in enumerate(args):
        if skip:
            skip -= 1
            continue
        if a in ("-o", "-MQ", "-MF", "-MT"):
            skip = 1
        elif a == "-include" and i + 1 < len(args) and args[i + 1] == out_h:
            skip = 1
        elif a in ("-c", "-MD", "-MMD") or a == entry["file"]:
            pass
        else:
            kept.append(a)
    return kept + ["-x", "c++-header", out_h, "-o", out_gch, "-MD", "-MF", depfile, "-MT", out_gch]


def main():
    header, compdb, out_h, out_gch, depfile = (os.path.abspath(p) for p in sys.argv[1:6])
    entry = test_command(compdb, out_h)
    cmd = pch_command(entry, out_h, out_gch, depfile)
    # What built the current .gch: its command and the depfile GCC wrote
    # (ninja reads the depfile after every run, and deletes it).
    stamp = out_gch + ".stamp"
    with open(header) as f:
        text = f.read()
    same_text = os.path.exists(out_h) and open(out_h).read() == text
    built = {}
    if os.path.exists(stamp):
        with open(stamp) as f:
            built = json.load(f)
    if same_text and built.get("command") == cmd and os.path.exists(out_gch):
        with open(depfile, "w") as f:
            f.write(built["depfile"])
        return
    if not same_text:
        shutil.copyfile(header, out_h)
    subprocess.run(cmd, cwd=entry["directory"], check=True)
    # A reconfigure may change the flags: rerun then (and write nothing if
    # they are the same).
    with open(depfile) as f:
        deps = f.read().rstrip() + f" \\\n {compdb}\n"
    with open(depfile, "w") as f:
        f.write(deps)
    with open(stamp, "w") as f:
        json.dump({"command": cmd, "depfile": deps}, f)

main()
