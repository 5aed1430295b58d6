#!/usr/bin/env python3
"""The provider boundary, checked as part of each provider library's build.

Usage: check_boundary.py SOURCE_ROOT FOLDER OUTPUT DEPFILE

Reads every .cc and .h directly in FOLDER (a provider's folder, relative to
SOURCE_ROOT, tests included) and fails, printing one compiler-style error per
include, when one of them includes a header of another provider: a file
under providers/ that is neither in FOLDER nor below providers/shared/ (what
several providers use). src/, manifests/, state/ and the system's headers
are not providers'. On success it writes OUTPUT, an empty header that the
library lists among its sources (so its objects wait for the check), and
DEPFILE, the files it read (so an edit reruns it).
"""
import os
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"')
SHARED = 'providers/shared/'


def owner(path):
    """The providers/ folder a header path belongs to, or None."""
    if not path.startswith('providers/'):
        return None
    return os.path.dirname(path) + '/'


def resolve(root, including_dir, name):
    """The include as a path from the root: beside the including file first
    (as the compiler looks), else from the root (the one -I of the tree)."""
    beside = os.path.normpath(os.path.join(including_dir, name))
    if os.path.exists(os.path.join(root, beside)):
        return beside
    return os.path.normpath(name)


def main():
    root, folder, output, depfile = sys.argv[1:5]
    folder = os.path.normpath(folder) + '/'
    read = []
    errors = []
    for name in sorted(os.listdir(os.path.join(root, folder))):
        if not name.endswith(('.cc', '.h')):
            continue
        rel = folder + name
        read.append(os.path.join(root, rel))
        with open(os.path.join(root, rel), encoding='utf-8') as f:
            for number, line in enumerate(f, 1):
                m = INCLUDE.match(line)
                if not m:
                    continue
                target = resolve(root, folder, m.group(1))
                where = owner(target)
                if where is None or target.startswith(SHARED) or where == folder:
                    continue
                errors.append(
                    f'{rel}:{number}: error: #include "{m.group(1)}" reaches into '
                    f'{where.rstrip("/")}, another provider: a provider may include '
                    f'src/, manifests/, state/, providers/shared/ and its own folder '
                    f'only (move what both need to providers/shared/)')
    if errors:
        print('\n'.join(errors), file=sys.stderr)
        return 1
    with open(depfile, 'w', encoding='utf-8') as f:
        f.write(output + ': ' + ' '.join(p.replace(' ', '\\ ') for p in read) + '\n')
    with open(output, 'w', encoding='utf-8') as f:
        f.write('// ' + folder + ' includes no other provider\'s header '
                '(providers/check_boundary.py).\n')
    return 0


if __name__ == '__main__':
    sys.exit(main())
