#!/usr/bin/env bash
# bench/faults.sh [TRIALS] [FAULT...]: runs each fault of tests/faults/ with
# TRIALS trials (default 50 for kill9, 12 for the others: FAULT_TRIALS_OTHER)
# at random moments, each fault on its own simulated fleet, and prints the
# table: fault, trials, passed, unlanded (trials whose fault did not land,
# run again and not counted: tests/faults/lib.sh), what a failing trial
# left. Logs of failing trials go to /var/tmp/fleet-faults-logs/
# (FAULT_LOG_DIR). Needs root (fleet-sim).
# The figures in docs/testing.md come from this script; the core count and load
# are printed with the table. FAULT-docker (FAULT-mixed) runs FAULT's script
# on docker nodes (docker, podman, docker): FAULT_ENGINE (tests/faults/lib.sh).
set -uo pipefail
cd "$(dirname "$0")/.."
TRIALS=${1:-50}
shift || true
FAULTS=("$@")
((${#FAULTS[@]})) || FAULTS=(kill9 sshcut power silent stall concurrent nossh disk disk-docker)
OTHER=${FAULT_TRIALS_OTHER:-12}
export FAULT_LOG_DIR=${FAULT_LOG_DIR:-/var/tmp/fleet-faults-logs}
export FLEET=${FLEET:-$PWD/build/src/engine/fleet}
[[ -x $FLEET ]] || { echo "build fleet first: bash scripts/build.sh" >&2; exit 1; }
results=()
t0=$SECONDS
for f in "${FAULTS[@]}"; do
  n=$TRIALS
  [[ $f == kill9 ]] || ((n = TRIALS < OTHER ? TRIALS : OTHER))
  echo "== $(date +%T) $f: $n trials" >&2
  # each line to stderr as it comes (tee /dev/stderr would reopen and
  # truncate a log file stderr points at), the summary line kept
  script=$f engine=${FAULT_ENGINE-}
  [[ $f != *-@(docker|mixed) ]] || script=${f%-*} engine=${f##*-}
  line=$(FAULT_ENGINE=$engine TRIALS=$n bash "tests/faults/$script.sh" 2>&1 | while IFS= read -r l; do
    printf '%s\n' "$l" >&2
    [[ $l != FAULT\ * ]] || printf '%s\n' "$l"
  done | tail -1)
  line=${line/#FAULT $script /FAULT $f }
  results+=("${line:-FAULT $f trials=$n passed=0 left=the script did not finish}")
done
printf '\n%-11s %7s %7s %9s  %s\n' fault trials passed unlanded "what a failing trial left"
for r in "${results[@]}"; do
  f=$(awk '{print $2}' <<<"$r")
  trials=$(grep -o 'trials=[0-9]*' <<<"$r" | cut -d= -f2)
  passed=$(grep -o 'passed=[0-9]*' <<<"$r" | cut -d= -f2)
  unlanded=$(grep -o 'unlanded=[0-9]*' <<<"$r" | cut -d= -f2)
  left=${r#*left=}
  printf '%-11s %7s %7s %9s  %s\n' "$f" "$trials" "$passed" "${unlanded:--}" "$left"
done
echo
echo "$(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg) at the end, $((SECONDS - t0)) s, $(date -u +%F)"
