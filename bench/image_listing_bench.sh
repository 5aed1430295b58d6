#!/usr/bin/env bash
# What a plan asks of nodes that declare images: 3 simulated nodes, each
# with 2 declared images already there (a converged plan), the nodes' real
# engine (FLEET_TEST_ENGINE=podman|docker). Per node and plan it counts
#   - the container CLI runs (a counting stand-in on each node's PATH that
#     logs its arguments, then runs the real CLI),
#   - the SSH sessions and exec requests fleet opened (the node's sshd log,
#     LogLevel DEBUG1 lines "session_input_channel_req: ... req exec"),
# and prints the plan's wall time (median of RUNS plans) and fleet -v's
# per-node probe time. FLEET=... measures another build (e.g. the one before
# a change) against the same fleet set-up.
# Usage: bash bench/image_listing_bench.sh [runs]   (root, after scripts/build.sh)
source "$(dirname "$0")/../tests/integration/lib.sh"
source "$ROOT/tests/integration/registry.sh"
RUNS=${1:-7}

registry_start
D1=$(image_push fleet/bb v1)
D2=$(image_push fleet/bb2 v1)
R=$REGISTRY
start_fleet 3 --insecure-registry "$R"
for n in dgx1 dgx2 dgx3; do
  on_node "$n" "$CE pull -q $R/fleet/bb@$D1 && $CE pull -q $R/fleet/bb2@$D2" >/dev/null
done
ALL='"dgx1", "dgx2", "dgx3"'
mkrepo --image "bb={\"ref\": \"$R/fleet/bb@$D1\", \"source\": \"registry\", \"nodes\": [$ALL]}" \
  --image "bb2={\"ref\": \"$R/fleet/bb2@$D2\", \"source\": \"registry\", \"nodes\": [$ALL]}"
expect_rc 0 apply --auto-approve
expect_rc 0 plan --detailed-exitcode

real_ce=$(PATH=/usr/local/bin:/usr/bin:/bin command -v "$CE")
for n in dgx1 dgx2 dgx3; do
  cat >"$(node_root "$n")/bin/$CE" <<SH
#!/bin/sh
echo "\$*" >> /srv/sim/ce-calls
exec $real_ce "\$@"
SH
  chmod 0755 "$(node_root "$n")/bin/$CE"
done
# DEBUG1 in each node's sshd, so that it logs every exec request; SIGHUP
# (to the sshd this script's fleet-sim started) makes it read its config.
for d in "$SIMDIR"/nodes/*/sshd; do
  if grep -q '^LogLevel' "$d/sshd_config"; then
    sed -i 's/^LogLevel.*/LogLevel DEBUG1/' "$d/sshd_config"
  else
    echo 'LogLevel DEBUG1' >>"$d/sshd_config"
  fi
  kill -HUP "$(cat "$d/sshd.pid")"
done
sleep 1

walls=()
for ((i = 0; i < RUNS; i++)); do
  for n in dgx1 dgx2 dgx3; do
    : >"$(node_root "$n")/sim/ce-calls" && chmod 0666 "$(node_root "$n")/sim/ce-calls"
  done
  for l in "$SIMDIR"/nodes/*/sshd/sshd.log; do : >"$l"; done
  t0=$(date +%s%N)
  expect_rc 0 -v plan --detailed-exitcode
  walls+=($(( ($(date +%s%N) - t0) / 1000000 )))
done
echo "engine: $ENGINE; fleet: $FLEET; $RUNS plans of 3 nodes x 2 declared images (converged)"
for n in dgx1 dgx2 dgx3; do
  calls=$(wc -l <"$(node_root "$n")/sim/ce-calls")
  log=$SIMDIR/nodes/$n/sshd/sshd.log
  echo "$n: $calls container CLI runs per plan: $(cut -d' ' -f1-3 "$(node_root "$n")/sim/ce-calls" | sort | uniq -c | tr -s ' ' | paste -sd';')"
  echo "$n: sshd: $(grep -c 'Accepted publickey' "$log" || true) session(s), $(grep -c 'request exec' "$log" || true) exec request(s)"
done
grep -h "probe dgx" "$WORK/out" "$WORK/err" | sed 's/^/last plan: /'
printf '%s\n' "${walls[@]}" | sort -n | awk '{a[NR]=$1} END {print "plan wall time, ms: median " a[int((NR+1)/2)] ", min " a[1] ", max " a[NR]}'
