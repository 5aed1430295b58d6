#!/usr/bin/env python3
"""count-inline-shell.py [DIR...]: how much node-side shell still lives in
C++ string literals (issue 45), as a repeatable figure.

What it counts: every non-test .cc under DIR (default: providers/ src/) is
scanned for top-level function definitions whose name ends in `Script` or
`Command` (`std::string FooScript(...) {` up to the closing `}` in column 0:
the repository's clang-format style puts both there). Inside those bodies:

  functions      how many such functions there are
  literal_lines  source lines that hold a string literal (the lines a reader
                 has to read as shell through C++ escaping)
  shell_lines    lines of shell those literals emit: each `\\n` escape in a
                 literal, plus 1 for a function whose literals emit none
                 (a one-line command)

Embedded .sh files are not counted: their text is not in a literal. Scripts
built outside a `*Script`/`*Command` function are not counted either; the
figure is a trend, not a proof of absence. Prints a total and, with -v, one
line per function (file:line name literal_lines shell_lines)."""
import os
import re
import sys

verbose = "-v" in sys.argv
dirs = [a for a in sys.argv[1:] if a != "-v"] or ["providers", "src"]
os.chdir(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

head = re.compile(r"^std::string (\w+(?:Script|Command))\(")
literal = re.compile(r'"(?:[^"\\]|\\.)*"')
funcs = literal_lines = shell_lines = 0
for d in dirs:
    for root, _, files in os.walk(d):
        for f in sorted(files):
            if not f.endswith(".cc") or f.endswith("_test.cc"):
                continue
            path = os.path.join(root, f)
            lines = open(path, encoding="utf-8").read().split("\n")
            i = 0
            while i < len(lines):
                m = head.match(lines[i])
                if not m:
                    i += 1
                    continue
                start, name = i, m.group(1)
                # A declaration (ends in ';' before any '{') is not a body.
                j = i
                while j < len(lines) and "{" not in lines[j] and not lines[j].rstrip().endswith(";"):
                    j += 1
                if j >= len(lines) or "{" not in lines[j]:
                    i = j + 1
                    continue
                end = j
                if not lines[j].rstrip().endswith("}") or lines[j].count("{") != lines[j].count("}"):
                    end = j + 1
                    while end < len(lines) and lines[end] != "}":
                        end += 1
                ll = sl = 0
                for line in lines[start:end + 1]:
                    lits = literal.findall(line)
                    if lits:
                        ll += 1
                        sl += sum(l.count("\\n") for l in lits)
                if ll:
                    funcs += 1
                    literal_lines += ll
                    shell_lines += max(sl, 1)
                    if verbose:
                        print("%s:%d %s %d %d" % (path, start + 1, name, ll, max(sl, 1)))
                i = end + 1
print("functions=%d literal_lines=%d shell_lines=%d" % (funcs, literal_lines, shell_lines))
