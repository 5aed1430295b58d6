#!/usr/bin/env bash
# The CPU a test costs, beside its wall time: runs each named meson test
# (from ./build) in a cgroup of its own and prints its wall seconds and the
# CPU seconds of every process it started (sshd nodes, engines, fleet,
# the test's own shell), daemons included: a child stays in its parent's
# cgroup wherever it is reparented. Containers that a root dockerd starts
# are in dockerd's cgroups and not counted. Needs root.
#   bash bench/test_cpu.sh heal_slow_test deployment_test
# SUITE/NAME measures the test of that name in that suite only: a name
# alone runs every test of that name (fabric_chain_test is an integration
# test and a unit test in the providers suite).
#   bash bench/test_cpu.sh integration/fabric_chain_test
set -euo pipefail
cd "$(dirname "$0")/.."
(($#)) || { echo "usage: bash bench/test_cpu.sh TEST..." >&2; exit 2; }
if [[ -d /sys/fs/cgroup/cpuacct ]]; then
  base=/sys/fs/cgroup/cpuacct  # cgroup v1: cpuacct.usage, nanoseconds
else
  base=/sys/fs/cgroup  # cgroup v2: cpu.stat's usage_usec
fi
usage_ns() {
  if [[ -f $1/cpuacct.usage ]]; then
    cat "$1/cpuacct.usage"
  else
    echo $(($(awk '$1 == "usage_usec" {print $2}' "$1/cpu.stat") * 1000))
  fi
}
echo "$(nproc) cores; load average $(cut -d' ' -f1-3 /proc/loadavg) at the start"
for t in "$@"; do
  cg=$base/fleet-test-cpu.$$
  mkdir "$cg"
  start=$(date +%s%N)
  rc=0
  (
    echo "$BASHPID" >"$cg/cgroup.procs"
    if [[ $t == */* ]]; then
      exec meson test -C build --no-rebuild --suite "${t%%/*}" "${t#*/}"
    fi
    exec meson test -C build --no-rebuild "$t"
  ) >/dev/null 2>&1 || rc=$?
  wall_ms=$((($(date +%s%N) - start) / 1000000))
  cpu_ms=$(($(usage_ns "$cg") / 1000000))
  # What outlived the test (none should) leaves for the parent cgroup.
  while read -r p; do echo "$p" >"$base/cgroup.procs" 2>/dev/null || true; done <"$cg/cgroup.procs"
  rmdir "$cg" 2>/dev/null || true
  printf '%-28s exit %-3s wall %6.1f s  CPU %6.1f s  (%.2f cores)\n' "$t" "$rc" \
    "$(bc <<<"scale=1; $wall_ms / 1000")" "$(bc <<<"scale=1; $cpu_ms / 1000")" \
    "$(bc <<<"scale=2; $cpu_ms / $wall_ms")"
done
