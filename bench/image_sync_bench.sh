#!/usr/bin/env bash
# Node-to-node image sync: `fleet apply` copying an image of >= 200 MB from
# node a to node b (podman save | podman load streamed through the
# controller) against the bare pipe an operator would type,
#   ssh a podman save ID | ssh b podman load
# measured in the same run on the same simulated nodes, alternating, the
# image removed from b before each run. Prints throughputs and the ratio
# fleet / bare (target >= 0.8).
# Usage: bash bench/image_sync_bench.sh [runs] [payload MB]   (root, after scripts/build.sh)
set -euo pipefail
RUNS=${1:-3}
MB=${2:-256}
source "$(dirname "$0")/../tests/integration/lib.sh"
source "$(dirname "$0")/../tests/integration/registry.sh"

median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
now_s() { date +%s.%N; }
node_field() {
  python3 -c 'import json,sys; print([n for n in json.load(open(sys.argv[1]))["nodes"] if n["name"]==sys.argv[2]][0][sys.argv[3]])' \
    "$SIMDIR/sim.json" "$1" "$2"
}
ssh_node() {  # ssh_node NAME COMMAND (OpenSSH, default ciphers)
  local name=$1
  shift
  ssh -q -o BatchMode=yes -o StrictHostKeyChecking=yes -o UserKnownHostsFile="$SIMDIR/known_hosts" \
    -i "$SIMDIR/id_ed25519" -p "$(node_field "$name" port)" "$(node_field "$name" user)@127.0.0.1" "$@"
}

echo "building a ${MB} MiB image (random payload) and pushing it to a local registry..."
registry_start
D=$(image_push fleet/big v1 "$MB")
start_fleet 2 --names a,b --insecure-registry "$REGISTRY"
ssh_node a "podman pull -q $REGISTRY/fleet/big@$D" >/dev/null
C=$(ssh_node a "podman image inspect --format '{{.Id}}' $REGISTRY/fleet/big@$D")
BYTES=$(ssh_node a "podman save $C | wc -c")
echo "image $D (config ${C:0:12}), save stream $((BYTES / 1048576)) MiB"

# Nodes set up first (probe install etc.), so the timed applies only copy.
mkrepo
fl apply --auto-approve || fail "first apply"
mkrepo --image 'big={"ref": "'"$REGISTRY/fleet/big@$D"'", "source": "node:a", "nodes": ["a", "b"]}'

remove_on_b() { ssh_node b "podman rmi -f $C >/dev/null 2>&1; ! podman image exists $C"; }
fleet_t=() step_t=() bare_t=()
for i in $(seq "$RUNS"); do
  remove_on_b
  t0=$(now_s)
  fl apply --auto-approve || fail "fleet apply"
  t1=$(now_s)
  grep -q "image.big@b: copied" "$WORK/out" "$WORK/err" || fail "fleet did not copy"
  fleet_t+=("$(awk -v a="$t0" -v b="$t1" 'BEGIN{print b-a}')")
  step_t+=("$(grep -ho 'image.big@b: complete after [0-9.]*s' "$WORK/out" "$WORK/err" | grep -o '[0-9.]*s$' | tr -d s)")
  remove_on_b
  t0=$(now_s)
  ssh_node a "podman save $C" | ssh_node b "podman load -q" >/dev/null
  t1=$(now_s)
  ssh_node b "podman image exists $C" || fail "bare pipe did not load"
  bare_t+=("$(awk -v a="$t0" -v b="$t1" 'BEGIN{print b-a}')")
  echo "run $i: fleet apply ${fleet_t[-1]} s (copy step ${step_t[-1]} s), bare pipe ${bare_t[-1]} s"
done
f=$(printf '%s\n' "${fleet_t[@]}" | median)
s=$(printf '%s\n' "${step_t[@]}" | median)
b=$(printf '%s\n' "${bare_t[@]}" | median)
mbps() { awk -v n="$BYTES" -v t="$1" 'BEGIN{printf "%.0f", n/t/1e6}'; }
echo "image sync, $((BYTES / 1048576)) MiB, median of $RUNS:"
echo "  fleet apply (plan + copy + verify + tag): $f s = $(mbps "$f") MB/s"
echo "  fleet copy step alone:                   $s s = $(mbps "$s") MB/s"
echo "  bare ssh a podman save | ssh b podman load: $b s = $(mbps "$b") MB/s"
echo "  ratio fleet apply / bare (throughput): $(awk -v f="$f" -v b="$b" 'BEGIN{printf "%.2f", b/f}') (target >= 0.8)"
echo "  ratio copy step / bare (throughput):   $(awk -v s="$s" -v b="$b" 'BEGIN{printf "%.2f", b/s}')"
