#!/usr/bin/env bash
# Benchmarks for the engine issue, each figure a ratio against a baseline
# measured in the same run (this machine is noisy):
#   1. `fleet plan` on 32 converged simulated nodes vs the floor: 32 parallel
#      OpenSSH `ssh node true` (target ratio <= 1.3);
#   2. peak RSS of `fleet plan` on 256 nodes (target < 100 MB).
# Usage: bash bench/plan_bench.sh [runs]   (root, after scripts/build.sh)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
FLEET=${FLEET:-$ROOT/build/src/engine/fleet}
SIM=$ROOT/tests/sim/fleet-sim
RUNS=${1:-7}
WORK=$(mktemp -d /var/tmp/fleet-bench.XXXXXX)
trap '"$SIM" stop "$WORK/sim32" --purge >/dev/null 2>&1 || true; "$SIM" stop "$WORK/sim256" --purge >/dev/null 2>&1 || true; rm -rf "$WORK"' EXIT

median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
now_ms() { date +%s%N | awk '{printf "%.1f", $1/1e6}'; }

"$SIM" start "$WORK/sim32" --nodes 32 >/dev/null
python3 "$ROOT/tests/integration/mkrepo.py" --sim "$WORK/sim32" --out "$WORK/repo32"
"$FLEET" -C "$WORK/repo32" --no-color apply --auto-approve >/dev/null
"$FLEET" -C "$WORK/repo32" --no-color plan --detailed-exitcode >/dev/null  # converged

# The floor: what 32 parallel OpenSSH connections running `true` cost.
# $1: extra ssh options (e.g. the key exchange libssh negotiates here).
ssh_all() {
  python3 - "$WORK/sim32/sim.json" "$@" <<'PY'
import json, subprocess, sys
sim = json.load(open(sys.argv[1]))
extra = sys.argv[2:]
procs = [subprocess.Popen(["ssh", "-q"] + extra + ["-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=yes",
                           "-o", "UserKnownHostsFile=" + sim["known_hosts"], "-i", sim["identity"],
                           "-p", str(n["port"]), "%s@127.0.0.1" % n["user"], "true"])
         for n in sim["nodes"]]
sys.exit(max(p.wait() for p in procs))
PY
}
floor=() floor_c=() plan=()
for _ in $(seq "$RUNS"); do
  t0=$(now_ms); ssh_all; t1=$(now_ms)
  floor+=("$(awk -v a="$t0" -v b="$t1" 'BEGIN{print b-a}')")
  t0=$(now_ms); ssh_all -o KexAlgorithms=curve25519-sha256; t1=$(now_ms)
  floor_c+=("$(awk -v a="$t0" -v b="$t1" 'BEGIN{print b-a}')")
  t0=$(now_ms); "$FLEET" -C "$WORK/repo32" --no-color plan --detailed-exitcode >/dev/null; t1=$(now_ms)
  plan+=("$(awk -v a="$t0" -v b="$t1" 'BEGIN{print b-a}')")
done
f=$(printf '%s\n' "${floor[@]}" | median)
fc=$(printf '%s\n' "${floor_c[@]}" | median)
p=$(printf '%s\n' "${plan[@]}" | median)
echo "plan, 32 converged nodes: median ${p} ms; floor (32 parallel ssh true): median ${f} ms; ratio $(awk -v a="$p" -v b="$f" 'BEGIN{printf "%.2f", a/b}') (target <= 1.3, $RUNS runs)"
echo "  against a floor with curve25519 key exchange (OpenSSH's default sntrup761 costs more CPU): median ${fc} ms; ratio $(awk -v a="$p" -v b="$fc" 'BEGIN{printf "%.2f", a/b}')"
"$SIM" stop "$WORK/sim32" --purge >/dev/null

"$SIM" start "$WORK/sim256" --nodes 256 >/dev/null
python3 "$ROOT/tests/integration/mkrepo.py" --sim "$WORK/sim256" --out "$WORK/repo256"
python3 - "$FLEET" "$WORK/repo256" <<'PY'
import resource, subprocess, sys, time
t = time.time()
rc = subprocess.call([sys.argv[1], "-C", sys.argv[2], "--no-color", "plan"], stdout=subprocess.DEVNULL)
wall = time.time() - t
rss_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
print("plan, 256 nodes: peak RSS %.1f MB (target < 100 MB), wall %.2f s, exit %d" % (rss_mb, wall, rc))
PY
