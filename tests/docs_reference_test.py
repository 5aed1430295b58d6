#!/usr/bin/env python3
"""docs_reference_test: the reference docs say exactly what the code accepts.

    python3 tests/docs_reference_test.py SOURCE_ROOT FLEET_BINARY

Two checks, each exact in both directions:

(a) docs/manifest.md against the manifest loader. The keys fleet.yaml and a
    recipe accept are read from the sources: every `X.CheckKeys({...})` list
    and every `k...Keys` array in manifests/*.cc, the recipe's key functions
    (`TopLevelKeys()`, `MountKeys()`) and two lists named in SOURCES below
    (ulimit names, placeholders). SOURCES says which docs section each list
    belongs to; a list the test cannot place (a new CheckKeys call, a new
    k...Keys array) fails the test until it is added there. In the docs, a
    section is a heading whose first `code span` is its id (e.g.
    "## `nodes.<name>.power`"), and its keys are the rows of the tables
    whose header's first cell is "key" (or "placeholder"), one `key` per row.
    A key accepted but not documented fails; a key documented but not
    accepted fails.

(b) docs/cli.md against `fleet --help`. Every command and subcommand that
    help lists needs a section whose heading's first code span is the
    command (e.g. "## `fleet state show`"); every flag a command's help
    prints needs a row in a table of that section whose header's first cell
    is "flag" (every -x/--xyz in that row's first cell counts). A command or
    flag documented that help does not print fails too. -h/--help is left
    out of both sides (every command has it).

Prints each problem on its own line and exits 1 when there is one.
"""

import os
import re
import subprocess
import sys

# Which list of accepted keys is documented in which section of
# docs/manifest.md. A locator is either the name of a file-scope array
# ("kTopKeys") or "Function/name": inside that function, the receiver of a
# CheckKeys({...}) call with an inline list, or an array declared there.
SOURCES = [
    ("manifests/manifest_loader.cc", "kTopKeys", "fleet.yaml"),
    ("manifests/manifest_loader.cc", "kSshKeys", "ssh"),
    ("manifests/manifest_loader.cc", "ManifestLoader::ReadState/state", "state"),
    ("manifests/manifest_loader.cc", "ManifestLoader::ReadPower/power", "power"),
    ("manifests/manifest_loader.cc", "ManifestLoader::ReadHub/hub", "hub"),
    ("manifests/manifest_loader.cc", "ManifestLoader::ReadDefaults/defaults", "defaults"),
    ("manifests/restart_policy.cc", "kKeys", "restart"),
    ("manifests/manifest_loader.cc", "ManifestLoader::ReadSync/sync", "sync"),
    ("manifests/manifest_loader.cc", "kNodeKeys", "nodes.<name>"),
    ("manifests/manifest_loader.cc", "ManifestLoader::ReadNodePower/power", "nodes.<name>.power"),
    ("manifests/manifest_loader.cc", "ManifestLoader::ReadNodePaths/paths", "nodes.<name>.paths"),
    ("manifests/manifest_loader.cc", "ManifestLoader::ReadNodeFabric/fabric", "nodes.<name>.fabric"),
    ("manifests/manifest_loader.cc", "ManifestLoader::ReadStore/store", "stores.<name>"),
    ("manifests/manifest_loader.cc", "ManifestLoader::ReadImage/image", "images.<name>"),
    ("manifests/manifest_loader.cc", "ManifestLoader::ReadModel/model", "models.<name>"),
    ("manifests/manifest_loader.cc", "ManifestLoader::ReadDeployment/deployment", "deployments.<name>"),
    ("manifests/health_schema.cc", "ReadHealthCheck/health", "deployments.<name>.health"),
    ("manifests/manifest_loader.cc", "ManifestLoader::ReadPromote/promote",
     "deployments.<name>.promote"),
    ("manifests/manifest_loader.cc", "ManifestLoader::ReadGateway/gateway", "gateways.<name>"),
    ("manifests/power_policy.cc", "kScheduleKeys", "deployments.<name>.schedule"),
    ("manifests/power_policy.cc", "kWakeKeys", "gateways.<name>.wake"),
    ("manifests/smoke_schema.cc", "ReadOne/m", "deployments.<name>.smoke[]"),
    ("manifests/smoke_schema.cc", "ReadFreshContext/fresh",
     "deployments.<name>.smoke[].fresh_context"),
    ("manifests/bench_schema.cc", "ReadBenchSettings/bench", "bench"),
    ("manifests/bench_schema.cc", "ReadProfile/p", "bench.profiles.<name>"),
    ("manifests/recipe.cc", "TopLevelKeys/keys", "recipe"),
    ("manifests/recipe.cc", "MountKeys/keys", "[[extra_mounts]]"),
    ("manifests/recipe.cc", "RecipeReader::ReadUlimits/names", "[ulimits]"),
    ("manifests/recipe.cc", "RecipePlaceholders/names", "{placeholder}"),
]

STRING = re.compile(r'"((?:[^"\\]|\\.)*)"')
CHECK_KEYS = re.compile(r"\b(\w+)\s*\.\s*CheckKeys\s*\(\s*")
ARRAY = re.compile(
    r"^([ \t]*)(?:static\s+)?const\s+std::vector<std::string>\s+(\w+)\s*=\s*\{", re.M)
# A function definition's first line: at column 0, not a comment, a
# preprocessor line or a closing brace; the name is the identifier before
# the first '('.
FUNCTION = re.compile(
    r"^(?![ \t#/}])[^;=(]*?[\s&*]([A-Za-z_]\w*(?:::~?[A-Za-z_]\w*)*)\s*\(", re.M)
CODE_SPAN = re.compile(r"`([^`]+)`")
FLAG = re.compile(r"(?<![\w-])(--?[A-Za-z][\w-]*)")

problems = []


def problem(message):
    problems.append(message)


def strip_comments(text):
    """C++ text with // and /* */ comments blanked (strings kept), same length."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append(text[i:j + 1])
            i = j + 1
        elif text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def brace_body(text, open_at):
    """The text between the '{' at open_at and its matching '}'."""
    depth = 0
    i = open_at
    while i < len(text):
        c = text[i]
        if c == '"':
            i += 1
            while i < len(text) and text[i] != '"':
                i += 2 if text[i] == "\\" else 1
        elif c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                return text[open_at + 1:i]
        i += 1
    return None


def line_of(text, pos):
    return text.count("\n", 0, pos) + 1


def enclosing_function(text, pos):
    name = None
    for m in FUNCTION.finditer(text, 0, pos):
        name = m.group(1)
    return name


def key_lists(root):
    """Every list of accepted keys in manifests/*.cc, by (file, locator).

    Returns (lists, unplaced): lists maps (file, locator) to (keys, line);
    unplaced holds descriptions of key lists that SOURCES must name."""
    lists = {}
    candidates = []  # (file, locator, line, why) that must be in SOURCES
    folder = os.path.join(root, "manifests")
    for name in sorted(os.listdir(folder)):
        if not name.endswith(".cc") or name.endswith("_test.cc"):
            continue
        rel = "manifests/" + name
        text = strip_comments(open(os.path.join(folder, name), encoding="utf-8").read())
        arrays = {}  # file-scope array name -> (keys, line)
        for m in ARRAY.finditer(text):
            body = brace_body(text, m.end() - 1)
            if body is None:
                problem(f"{rel}:{line_of(text, m.start())}: cannot read the array {m.group(2)}")
                continue
            keys = STRING.findall(body)
            line = line_of(text, m.start())
            if m.group(1) == "":
                locator = m.group(2)
                arrays[locator] = (keys, line)
                if re.fullmatch(r"k\w*Keys", locator):
                    candidates.append((rel, locator, line, "a k...Keys array"))
            else:
                function = enclosing_function(text, m.start()) or "?"
                locator = f"{function}/{m.group(2)}"
                if function.split("::")[-1].endswith("Keys"):
                    candidates.append((rel, locator, line, "the list of a ...Keys() function"))
            lists[(rel, locator)] = (keys, line)
        for m in CHECK_KEYS.finditer(text):
            line = line_of(text, m.start())
            function = enclosing_function(text, m.start()) or "?"
            rest = text[m.end():]
            if rest.startswith("{"):
                body = brace_body(text, m.end())
                if body is None:
                    problem(f"{rel}:{line}: cannot read the CheckKeys list in {function}")
                    continue
                locator = f"{function}/{m.group(1)}"
                lists[(rel, locator)] = (STRING.findall(body), line)
                candidates.append((rel, locator, line, "a CheckKeys({...}) list"))
            else:
                ident = re.match(r"\w+", rest)
                if ident is None or ident.group(0) not in arrays:
                    problem(f"{rel}:{line}: {function} calls {m.group(1)}.CheckKeys with "
                            f"something this test cannot read (not an inline list or a "
                            f"file-scope array of this file)")
                    continue
                candidates.append((rel, ident.group(0), line, "an array given to CheckKeys"))
    placed = {(f, loc) for f, loc, _ in SOURCES}
    unplaced = []
    seen = set()
    for rel, locator, line, why in candidates:
        if (rel, locator) in placed or (rel, locator) in seen:
            continue
        seen.add((rel, locator))
        keys = ", ".join(lists.get((rel, locator), ([], 0))[0])
        unplaced.append(f"{rel}:{line}: {why} ({locator}: {keys}) is not in SOURCES of "
                        f"tests/docs_reference_test.py: add it with the docs/manifest.md "
                        f"section that documents these keys")
    return lists, unplaced


def doc_tables(path, header_words):
    """Sections of a Markdown file and the first-cell entries of their tables.

    Returns {section id: [(entry cell, line)]} for tables whose header's
    first cell is one of header_words; a table of that kind under a heading
    without a code span is reported."""
    sections = {}
    current = None
    in_fence = False
    in_table = False
    counted = False
    lines = open(path, encoding="utf-8").read().split("\n")
    for number, line in enumerate(lines, 1):
        if line.lstrip().startswith("```"):
            in_fence = not in_fence
            continue
        if in_fence:
            continue
        heading = re.match(r"#{1,6}\s+(.*)", line)
        if heading:
            span = CODE_SPAN.search(heading.group(1))
            current = span.group(1).strip() if span else None
            in_table = False
            continue
        if not line.startswith("|"):
            in_table = False
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if not in_table:
            in_table = True
            counted = cells[0].lower() in header_words
            if counted and current is None:
                problem(f"{path}:{number}: a '{cells[0]}' table under a heading with no "
                        f"`section` in it")
                counted = False
            if counted:
                sections.setdefault(current, [])
            continue
        if not counted or re.fullmatch(r":?-+:?", cells[0]):
            continue
        sections[current].append((cells[0], number))
    return sections


def check_manifest_doc(root):
    doc = os.path.join(root, "docs", "manifest.md")
    lists, unplaced = key_lists(root)
    for u in unplaced:
        problem(u)
    accepted = {}  # section -> {key: where}
    for rel, locator, section in SOURCES:
        if (rel, locator) not in lists:
            problem(f"{rel}: no key list {locator} (renamed or moved? SOURCES in "
                    f"tests/docs_reference_test.py names it for section `{section}`)")
            continue
        keys, line = lists[(rel, locator)]
        if not keys:
            problem(f"{rel}:{line}: the key list {locator} reads as empty")
        for k in keys:
            accepted.setdefault(section, {})[k] = f"{rel}:{line} ({locator})"
    if not os.path.exists(doc):
        problem(f"{doc} does not exist")
        return
    documented = doc_tables(doc, ("key", "placeholder"))
    for section in documented:
        if section not in accepted:
            problem(f"docs/manifest.md: section `{section}` has a key table, but no list of "
                    f"accepted keys maps to it (SOURCES in tests/docs_reference_test.py)")
    for section, keys in accepted.items():
        rows = documented.get(section)
        if rows is None:
            problem(f"docs/manifest.md: no section `{section}` with a key table (a heading "
                    f"whose first code span is `{section}`)")
            rows = []
        names = {}
        for cell, line in rows:
            span = re.fullmatch(r"`([^`]+)`", cell)
            if span is None:
                problem(f"docs/manifest.md:{line}: section `{section}`: the first cell "
                        f"'{cell}' is not one `key`")
                continue
            name = span.group(1)
            if section == "{placeholder}":
                name = name.strip("{}")
            if name in names:
                problem(f"docs/manifest.md:{line}: section `{section}` documents `{name}` "
                        f"twice (also line {names[name]})")
            names[name] = line
        for k, where in keys.items():
            if k not in names:
                problem(f"docs/manifest.md: section `{section}` has no entry for key `{k}`, "
                        f"which the loader accepts ({where})")
        for name, line in names.items():
            if name not in keys:
                problem(f"docs/manifest.md:{line}: section `{section}` documents key "
                        f"`{name}`, which the loader does not accept (its list: "
                        f"{', '.join(keys)})")


def help_text(fleet, path):
    try:
        r = subprocess.run([fleet, *path, "--help"], capture_output=True, text=True, timeout=30)
    except OSError as e:
        problem(f"cannot run {fleet}: {e}")
        return None
    if r.returncode != 0:
        problem(f"`fleet {' '.join(path)} --help` exited {r.returncode}: {r.stderr.strip()}")
        return None
    return r.stdout


def parse_help(text):
    """(flags, subcommands) of one CLI11 help page."""
    flags, subcommands = set(), []
    part = None
    for line in text.split("\n"):
        if re.fullmatch(r"[A-Za-z]+:\s*", line):
            part = line.strip().rstrip(":").lower()
            continue
        entry = re.match(r"  (\S+)", line)
        if entry is None:
            continue
        if part == "options":
            for name in entry.group(1).split(","):
                flags.add(name)
        elif part == "subcommands":
            subcommands.append(entry.group(1))
    flags -= {"-h", "--help"}
    return flags, subcommands


def check_cli_doc(root, fleet):
    doc = os.path.join(root, "docs", "cli.md")
    if not (os.path.isfile(fleet) and os.access(fleet, os.X_OK)):
        problem(f"{fleet} is not an executable (build fleet first)")
        return
    commands = {}  # command path (tuple) -> flags help prints
    todo = [()]
    while todo:
        path = todo.pop(0)
        text = help_text(fleet, path)
        if text is None:
            continue
        flags, subs = parse_help(text)
        commands[path] = flags
        todo.extend(path + (s,) for s in subs)
    if not os.path.exists(doc):
        problem(f"{doc} does not exist")
        return
    documented = {}
    for section, rows in doc_tables(doc, ("flag",)).items():
        words = section.split()
        if words[0] != "fleet" or not all(re.fullmatch(r"[a-z][a-z-]*", w) for w in words[1:]):
            problem(f"docs/cli.md: a flag table under `{section}`, which is not `fleet` and "
                    f"command words")
            continue
        documented[tuple(words[1:])] = rows
    # Sections without a flag table still document a command.
    heading_commands = {}
    for number, line in enumerate(open(doc, encoding="utf-8").read().split("\n"), 1):
        heading = re.match(r"#{1,6}\s+(.*)", line)
        span = CODE_SPAN.search(heading.group(1)) if heading else None
        if span and span.group(1).split()[0] == "fleet":
            words = span.group(1).split()
            if all(re.fullmatch(r"[a-z][a-z-]*", w) for w in words[1:]):
                heading_commands[tuple(words[1:])] = number
    for path, flags in commands.items():
        name = " ".join(("fleet",) + path)
        if path not in heading_commands:
            problem(f"docs/cli.md: no section for `{name}` (a heading whose first code span "
                    f"is `{name}`), which `{name} --help` shows")
        names = {}
        for cell, line in documented.get(path, []):
            for flag in FLAG.findall(cell):
                if flag in ("-h", "--help"):
                    continue
                names.setdefault(flag, line)
        for flag in sorted(flags - set(names)):
            problem(f"docs/cli.md: `{name}` does not document {flag}, which `{name} --help` "
                    f"prints")
        for flag in sorted(set(names) - flags):
            problem(f"docs/cli.md:{names[flag]}: `{name}` documents {flag}, which "
                    f"`{name} --help` does not print")
    for path, line in sorted(heading_commands.items(), key=lambda x: x[1]):
        if path not in commands:
            problem(f"docs/cli.md:{line}: a section for `fleet {' '.join(path)}`, which is no "
                    f"command of `fleet --help`")


def main():
    if len(sys.argv) != 3:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    root, fleet = sys.argv[1], os.path.abspath(sys.argv[2])
    check_manifest_doc(root)
    check_cli_doc(root, fleet)
    for p in problems:
        print(p)
    if problems:
        print(f"docs_reference_test: {len(problems)} problem(s)")
        return 1
    print("docs_reference_test: docs/manifest.md and docs/cli.md match the loader and "
          "fleet --help")
    return 0


if __name__ == "__main__":
    sys.exit(main())
