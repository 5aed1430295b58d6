#!/bin/sh
# Lists the revisions fleet staged (a mark, staged_mark.h) whose snapshot is
# there, in each hub cache given: one line
# "staged<TAB>LOCATION<TAB>REPO FOLDER<TAB>COMMIT<TAB>BYTES" each (BYTES of
# the snapshot's files), and "unanswered<TAB>LOCATION<TAB>CACHE" for a cache
# that did not answer.
# A store on a hung network mount must not hang the plan: the shell's own
# glob would block in the kernel for good. Each cache is first stat'ed
# under timeout (-k: SIGKILL for a process stuck in an NFS wait), and one
# that does not answer is named and skipped (the model's own probe makes it
# the plan's error); the size reading runs under timeout too. Without
# timeout(1) neither is bounded.
# Embedded in fleet at build time (kStagedMarkInventoryScript) and run in
# the probe's own shell (a fragment's subshell) after
# `set -- LOCATION CACHE [LOCATION CACHE]...` (each quoted once by fleet).
if command -v timeout >/dev/null 2>&1; then
  smi_stat() { timeout -k 5 10 stat -L -- "$1" >/dev/null 2>&1; }
  smi_sizes() { timeout -k 5 120 find -L "$1" -type f -printf '%s\n' 2>/dev/null; }
else
  smi_stat() { :; }
  smi_sizes() { find -L "$1" -type f -printf '%s\n' 2>/dev/null; }
fi
while [ $# -ge 2 ]; do
  l=$1 c=$2
  shift 2
  smi_stat "$c"
  sr=$?
  if [ "$sr" -eq 124 ] || [ "$sr" -eq 137 ]; then
    printf 'unanswered\t%s\t%s\n' "$l" "$c"
    continue
  fi
  for f in "$c"/*/.fleet-staged/*; do
    [ -f "$f" ] || continue
    r=${f##*/} x=${f%/.fleet-staged/*}
    [ -d "$x/snapshots/$r" ] || continue
    b=$(smi_sizes "$x/snapshots/$r" | awk '{ s += $1 } END { print s + 0 }')
    printf 'staged\t%s\t%s\t%s\t%s\n' "$l" "${x##*/}" "$r" "$b"
  done
done
