#!/usr/bin/env bash
# Self-test of fleet-sim's --exec-cost stand-in (exec_cost.c), no sim needed:
#   - a dynamic program (/bin/true) and a shell (sh -c true) each burn the
#     cost once: CPU time per start grows by at least the cost, and by less
#     than twice it;
#   - a static program exec'd by the preloaded shell pays it too (at the
#     exec), and the accounting file gets one line per start, the static
#     one included; without the file nothing is written.
# Exit 0 ok, 1 failed, 77 skipped (no C compiler).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
CC=${CC:-cc}
command -v "$CC" >/dev/null || { echo "SKIP: no C compiler"; exit 77; }
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
"$CC" -O2 -shared -fPIC -o "$W/exec_cost.so" "$HERE/exec_cost.c" -ldl
printf 'int main(void) { return 0; }\n' >"$W/static.c"
if ! "$CC" -static -O2 -o "$W/static_true" "$W/static.c" 2>/dev/null; then
  echo "SKIP: no static libc to build a static program"
  exit 77
fi
fail=0
COST=20
N=10

# CPU ms (user+sys of the children) per start of "$@", N starts in a loop.
cpu_per_start() {
  python3 - "$N" "$@" <<'PY'
import os, resource, subprocess, sys
n, argv = int(sys.argv[1]), sys.argv[2:]
for _ in range(n):
    subprocess.run(argv, check=True)
ru = resource.getrusage(resource.RUSAGE_CHILDREN)
print("%.2f" % ((ru.ru_utime + ru.ru_stime) * 1e3 / n))
PY
}

check() { # check NAME BASE_MS WITH_MS STARTS
  local extra
  extra=$(python3 -c "print('%.2f' % ($3 - $2))")
  if python3 -c "import sys; sys.exit(0 if $COST * $4 <= $3 - $2 < $COST * ($4 + 1) else 1)"; then
    echo "ok: $1 pays $extra ms more CPU per start ($4 x $COST ms wanted)"
  else
    echo "FAIL: $1: $2 ms without, $3 ms with the stand-in ($4 x $COST ms wanted)"
    fail=1
  fi
}

pre=(env LD_PRELOAD="$W/exec_cost.so" FLEET_SIM_EXEC_COST_MS="$COST")
base=$(cpu_per_start /bin/true)
with=$(cpu_per_start "${pre[@]}" /bin/true)
check "/bin/true (env sets the preload: true alone pays)" "$base" "$with" 1
base=$(cpu_per_start sh -c "$W/static_true")
with=$(cpu_per_start "${pre[@]}" sh -c "$W/static_true")
check "sh -c STATIC (sh and the static program)" "$base" "$with" 2

log=$W/exec.log
: >"$log"
"${pre[@]}" FLEET_SIM_EXEC_LOG="$log" sh -c "/bin/true; $W/static_true"
got=$(awk '{print $3}' "$log" | sed 's#.*/##' | tr '\n' ' ')
if [[ $got == "dash true static_true " || $got == "bash true static_true " ]]; then
  echo "ok: accounting: $got"
else
  echo "FAIL: accounting: '$got' (want the shell, true, static_true)"
  fail=1
fi
rm -f "$log"
"${pre[@]}" FLEET_SIM_EXEC_LOG="$log" /bin/true
if [[ -e $log ]]; then
  echo "FAIL: the stand-in wrote $log, which did not exist"
  fail=1
else
  echo "ok: no accounting without the file"
fi
exit "$fail"
