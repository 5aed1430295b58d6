#!/usr/bin/env bash
# The fabric between nodes, on a two-network simulated fleet
# (fleet-sim --net lan+fabric: LAN to the controller rate-limited by tc tbf,
# fabric between the nodes unlimited). One source (dgx1), targets dgx2..dgx5.
# For an image (random payload, imported on dgx1) and a model (mkmodel.py
# shards in dgx1's cache), in one run:
#   fleet over the fabric, 1 target and 4 targets (one apply: at once);
#   fleet through the controller (FLEET_FABRIC=off), 1 and 4 targets;
#   images only: sparkrun's way, `podman save | ssh TARGET podman load` from
#   the source node over the targets' fabric addresses, one after the other
#   (the bench puts the sim's client key on dgx1 for that: fleet never does);
# each with the bytes that crossed the controller (the LAN bridge's own
# counters: fleet-sim net-stats).
# Usage: bash bench/fabric_bench.sh [image MiB] [model MiB] [lan rate]
#        (root, after scripts/build.sh; ~10 min with the defaults)
set -euo pipefail
IMG_MB=${1:-257}
MODEL_MB=${2:-1000}
LAN_RATE=${3:-200mbit}
source "$(dirname "$0")/../tests/integration/lib.sh"

TARGETS=(dgx2 dgx3 dgx4 dgx5)
ctl_bytes() { "$SIM" net-stats "$SIMDIR" | awk -F= '{s += $2} END {printf "%.0f\n", s}'; }
now_ms() { echo $((${EPOCHREALTIME/./} / 1000)); }
declare -A MS=() BY=()
timed() {  # timed LABEL COMMAND...: runs it, records ms and controller bytes
  local label=$1 t0 b0
  shift
  b0=$(ctl_bytes)
  t0=$(now_ms)
  "$@" || fail "$label"
  MS[$label]=$(($(now_ms) - t0))
  BY[$label]=$(($(ctl_bytes) - b0))
  printf '  %-34s %8d ms  %12d bytes through the controller\n' "$label" "${MS[$label]}" "${BY[$label]}"
}

echo "== ${#TARGETS[@]}+1 nodes, LAN $LAN_RATE, fabric unlimited ($(nproc) cores, load $(cut -d' ' -f1 /proc/loadavg))"
start_fleet 5 --net lan+fabric --lan-rate "$LAN_RATE"

echo "== image: $IMG_MB MiB on dgx1"
D=sha256:$(printf 'fleet fabric bench' | sha256sum | cut -d' ' -f1)
REF="localhost/fleet/fabbench@$D"
on_node dgx1 "d=\$(mktemp -d) && head -c $((IMG_MB * 1048576)) /dev/urandom > \$d/blob && tar -C \$d -c blob | podman import -q - localhost/fleet/fabbench:sha256-${D#sha256:} >/dev/null && rm -rf \$d"
C=$(on_node dgx1 "podman image inspect --format '{{.Id}}' localhost/fleet/fabbench:sha256-${D#sha256:}")
img() { printf 'b={"ref": "%s", "source": "node:dgx1", "nodes": [%s]}' "$REF" "$1"; }
ONE='"dgx1", "dgx2"'
ALL='"dgx1", "dgx2", "dgx3", "dgx4", "dgx5"'
rm_image() { for n in "$@"; do on_node "$n" "podman rmi -f $C >/dev/null 2>&1 || true"; done; }
apply_quiet() { fl apply --auto-approve; }
apply_ctl() { FLEET_FABRIC=off fl apply --auto-approve; }

mkrepo
fl apply --auto-approve || fail "first apply (node adoption)"
mkrepo --image "$(img "$ONE")"
timed "image fabric 1 target" apply_quiet
rm_image dgx2
mkrepo --image "$(img "$ALL")"
timed "image fabric 4 targets" apply_quiet
rm_image "${TARGETS[@]}"
mkrepo --image "$(img "$ONE")"
timed "image controller 1 target" apply_ctl
rm_image dgx2
mkrepo --image "$(img "$ALL")"
timed "image controller 4 targets" apply_ctl
rm_image "${TARGETS[@]}"

# sparkrun's way: ssh from the source node to each target's fabric address.
on_node dgx1 "mkdir -p ~/.ssh && cat > ~/.ssh/bench_key && chmod 600 ~/.ssh/bench_key" <"$SIMDIR/id_ed25519"
sparkrun() {
  local n
  for n in "$@"; do
    on_node dgx1 "podman save $C | ssh -q -o BatchMode=yes -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -i ~/.ssh/bench_key -p $(node_field "$n" port) $(node_field "$n" user)@$(node_field "$n" fabric_address) podman load -q" >/dev/null || return 1
  done
}
timed "image sparkrun-way 1 target" sparkrun dgx2
rm_image dgx2
timed "image sparkrun-way 4 targets" sparkrun "${TARGETS[@]}"
on_node dgx1 "rm -f ~/.ssh/bench_key"

echo "== model: ~$MODEL_MB MB on dgx1 (4 shards)"
REV=$(printf 'fleet-fabric-bench' | sha1sum | cut -c1-40)
python3 "$ROOT/tests/integration/mkmodel.py" --cache "$(node_root dgx1)/hf/hub" --repo fleet/bench-model \
  --revision "$REV" --shards 4 --shard-kb $((MODEL_MB * 1000000 / 4 / 1024)) --owner "$(node_field dgx1 user)" >/dev/null
mod() { printf 'm={"repo": "fleet/bench-model", "revision": "%s", "source": "node:dgx1", "nodes": [%s]}' "$REV" "$1"; }
rm_model() { for n in "$@"; do rm -rf "$(node_root "$n")/hf/hub/models--fleet--bench-model"; done; }
mkrepo --model "$(mod "$ONE")"
timed "model fabric 1 target" apply_quiet
rm_model dgx2
mkrepo --model "$(mod "$ALL")"
timed "model fabric 4 targets" apply_quiet
rm_model "${TARGETS[@]}"
mkrepo --model "$(mod "$ONE")"
timed "model controller 1 target" apply_ctl
rm_model dgx2
mkrepo --model "$(mod "$ALL")"
timed "model controller 4 targets" apply_ctl

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }
echo "== ratios"
for k in image model; do
  echo "  $k: fabric 4/1 targets $(ratio "${MS[$k fabric 4 targets]}" "${MS[$k fabric 1 target]}")x;" \
    "controller/fabric 4 targets $(ratio "${MS[$k controller 4 targets]}" "${MS[$k fabric 4 targets]}")x;" \
    "bytes through the controller per GB over the fabric (4 targets):" \
    "$(awk -v b="${BY[$k fabric 4 targets]}" -v mb=$([[ $k == image ]] && echo $((IMG_MB * 4)) || echo $((MODEL_MB * 4))) 'BEGIN { printf "%.0f", b / (mb / 1000) }')"
done
echo "  image: sparkrun-way 4 targets / fleet fabric 4 targets" \
  "$(ratio "${MS[image sparkrun-way 4 targets]}" "${MS[image fabric 4 targets]}")x"
