#!/usr/bin/env python3
"""count-inline-shell.py [-v] [DIR...]: how much node-side shell still lives
in C++ string literals (issue 45), as a repeatable figure.

What it counts: every non-test .cc under DIR (default: providers/ src/) is
scanned for top-level function definitions whose name ends in `Script` or
`Command` (`std::string FooScript(...) {` up to the closing `}` in column 0:
the repository's clang-format style puts both there). Inside those bodies:

  functions      how many such functions there are
  literal_lines  source lines that hold a string literal (the lines a reader
                 has to read as shell through C++ escaping)
  shell_lines    lines of shell those literals emit: each `\\n` escape in a
                 literal (not the `\\\\n` of a printf format), plus 1 for a
                 function whose literals emit none (a one-line command)

Shell is also built outside such functions (a step's command written where
it runs, a fragment inside a helper). The second line counts what the first
misses: outside those bodies, source lines holding a literal that reads as
shell (one of `&&`, `||`, `$(`, `${`, `$?`, `>/dev/null`, `2>&1`, `; then`
and its kin, `fi`, `esac`, a pipe into a text tool, or a raw string
R"(...)"), grouped by the function around them:

  outside_functions      functions holding such literals
  outside_literal_lines  source lines holding them
  outside_shell_lines    lines of shell they emit, counted as above
  outside_multiline      functions among them whose literals emit 2 lines
                         or more (a script, not a one-line command)

The second figure is a net, not a parser: a literal of prose with a `&&` is
caught, and shell assembled from literals that hold none of those marks is
not. Embedded .sh files are not counted: their text is not in a literal.
Prints both totals and, with -v, one line per function (file:line name
literal_lines shell_lines; "outside" before the name for the second kind)."""
import os
import re
import sys

verbose = "-v" in sys.argv
dirs = [a for a in sys.argv[1:] if a != "-v"] or ["providers", "src"]
os.chdir(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

head = re.compile(r"^std::string (\w+(?:Script|Command))\(")
literal = re.compile(r'"(?:[^"\\]|\\.)*"')
shellish = re.compile(r"&&|\|\||\$\(|\$\{|\$\?|>/dev/null|2>&1|; *(then|do|fi|done|esac|exit)\b"
                      r"|\b(fi|esac)\b|\| *(while|head|tail|tr|sed|grep|awk|cut|sort|xargs|tee|wc)\b")
# A column-0 function definition's name (what an outside literal is inside).
definition = re.compile(r"^(?!namespace|using|static_assert|#|//)[A-Za-z][\w:<>,*& ]*?\b(~?[A-Za-z_][\w:]*)\(")


def newlines(lit):
    """The newlines a literal holds: its `\\n` escapes, not a `\\\\n` (an
    escaped backslash before an n: printf's format, shell's own `\\n`)."""
    return sum(1 for e in re.findall(r"\\.", lit) if e == "\\n")


def script_bodies(lines):
    """(start, end, name) of each *Script/*Command body, as the first figure
    counts them."""
    bodies = []
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
        bodies.append((start, end, name))
        i = end + 1
    return bodies


def code_of(line):
    """The line without a trailing // comment outside literals."""
    out, i, quoted = [], 0, False
    while i < len(line):
        c = line[i]
        if quoted:
            if c == "\\":
                out.append(line[i:i + 2])
                i += 2
                continue
            if c == '"':
                quoted = False
        elif c == '"':
            quoted = True
        elif line.startswith("//", i):
            break
        out.append(c)
        i += 1
    return "".join(out)


funcs = literal_lines = shell_lines = 0
out_funcs = out_literal_lines = out_shell_lines = out_multiline = 0
for d in dirs:
    for root, _, files in os.walk(d):
        for f in sorted(files):
            if not f.endswith(".cc") or f.endswith("_test.cc"):
                continue
            path = os.path.join(root, f)
            lines = open(path, encoding="utf-8").read().split("\n")
            inside = set()
            for start, end, name in script_bodies(lines):
                inside.update(range(start, end + 1))
                ll = sl = 0
                for line in lines[start:end + 1]:
                    lits = literal.findall(line)
                    if lits:
                        ll += 1
                        sl += sum(newlines(l) for l in lits)
                if ll:
                    funcs += 1
                    literal_lines += ll
                    shell_lines += max(sl, 1)
                    if verbose:
                        print("%s:%d %s %d %d" % (path, start + 1, name, ll, max(sl, 1)))
            # Outside those bodies: literals that read as shell, by function.
            found = {}  # (line of the definition, name) -> [literal_lines, shell_lines]
            where = (0, "(file scope)")
            raw_end = None
            for n, line in enumerate(lines):
                m = definition.match(line)
                if m and raw_end is None:
                    where = (n, m.group(1))
                if n in inside:
                    continue
                if raw_end is not None:  # inside a raw string: every line is shell text
                    found.setdefault(where, [0, 0])
                    found[where][0] += 1
                    found[where][1] += 1
                    if ')"' in line:
                        raw_end = None
                    continue
                code = code_of(line)
                raw = code.find('R"(')
                if raw >= 0 and ')"' not in code[raw + 3:]:
                    raw_end = n
                    found.setdefault(where, [0, 0])
                    found[where][0] += 1
                    continue
                lits = literal.findall(code)
                if raw >= 0 or any(shellish.search(l) for l in lits):
                    found.setdefault(where, [0, 0])
                    found[where][0] += 1
                    found[where][1] += sum(newlines(l) for l in lits)
            for (n, name), (ll, sl) in sorted(found.items()):
                out_funcs += 1
                out_literal_lines += ll
                out_shell_lines += max(sl, 1)
                out_multiline += sl >= 2
                if verbose:
                    print("%s:%d outside %s %d %d" % (path, n + 1, name, ll, max(sl, 1)))
print("functions=%d literal_lines=%d shell_lines=%d" % (funcs, literal_lines, shell_lines))
print("outside_functions=%d outside_literal_lines=%d outside_shell_lines=%d outside_multiline=%d" %
      (out_funcs, out_literal_lines, out_shell_lines, out_multiline))
