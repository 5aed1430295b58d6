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
# timeout(1) neither is bounded. The stat is the installed fleet-probe's
# --stat-within where it knows it (one process, not timeout's and stat's:
# issue 48); one installed before it knew the flag exits 2, and timeout
# and stat answer then.
# Embedded in fleet at build time (kStagedMarkInventoryScript) and run in
# the probe's own shell (a fragment's subshell) after one assignment,
#   smi_probe  the installed fleet-probe (kInstalledProbe, under $HOME),
# and `set -- LOCATION CACHE [LOCATION CACHE]...` (each quoted once by fleet).
: "${smi_probe?}"
if command -v timeout >/dev/null 2>&1; then
  smi_stat_cli() { timeout -k 5 10 stat -L -- "$1" >/dev/null 2>&1; }
  smi_sizes() { timeout -k 5 120 find -L "$1" -type f -printf '%s\n' 2>/dev/null; }
else
  smi_stat_cli() { :; }
  smi_sizes() { find -L "$1" -type f -printf '%s\n' 2>/dev/null; }
fi
smi_stat() {
  if [ -x "$smi_probe" ]; then
    "$smi_probe" --stat-within 10 "$1" >/dev/null 2>&1
    smi_r=$?
    case $smi_r in 2 | 126 | 127) ;; *) return "$smi_r" ;; esac
  fi
  smi_stat_cli "$1"
}
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
