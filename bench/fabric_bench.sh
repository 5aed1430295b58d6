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
#
# Shaped mode (issue 31): the fabric links shaped too (fleet-sim
# --fabric-rate: tc tbf at RATE each way on every node's fabric link), so
# that the link, not this machine's CPUs, binds, as on a real switched
# fabric. Over the fabric only, from dgx1 to 1, 2 and 4 targets at once
# (a fan-out goes as one chain: src/engine/copy_chains.h), and to 4 targets
# with a copy per target (FLEET_FABRIC_CHAIN=off, the baseline in the same
# run), for an image and a model, each run prints: wall time and its ratio to one
# target; the source's fabric egress (the tx_bytes of dgx1's enp1s0f1np1,
# read in its netns) in bytes and as a multiple of the payload (the image's
# `podman save` stream, the model's files); the bytes through the controller
# (net-stats, as above); the time the link needs for that egress at RATE
# and wall time against it; the controller's own CPU time (fleet's
# user+sys), the nodes' CPU time (everything under the 5 nodes' sshd, in a
# cgroup v2 of the bench's: sessions, openssl, podman, writers), their sum
# as a share of the cores over the wall time, and the whole machine's CPU
# busy share (100 % = every core; other users' work included): the link
# binds when wall ~ link time and the copy's share stays well under 100 %.
#   bash bench/fabric_bench.sh --shaped [RATE] [image MiB] [model MiB] [lan rate]
#        (defaults 100mbit 64 128 200mbit; ~5 min. 100mbit: at 200mbit a
#        copy per target already used 40-55 % of this machine's 2 cores, and
#        a chain to 4 targets runs 4 TLS receivers and 3 senders on them:
#        docs/benchmarks.md)
# The nodes' engine: rootless podman, or with FLEET_TEST_ENGINE=docker a
# dockerd per node (the operators' engine; its dockerd, which does what
# `docker load` reads, counts in the nodes' CPU).
set -euo pipefail
SHAPED=0
if [[ ${1-} == --shaped ]]; then
  SHAPED=1
  shift
  FABRIC_RATE=${1:-100mbit}
  shift || true
fi
IMG_MB=${1:-$( ((SHAPED)) && echo 64 || echo 257)}
MODEL_MB=${2:-$( ((SHAPED)) && echo 128 || echo 1000)}
LAN_RATE=${3:-200mbit}
source "$(dirname "$0")/../tests/integration/lib.sh"
if ((SHAPED)); then
  source "$ROOT/tests/sim/sim_net.sh"  # net_rate_bits
  RATE_BITS=$(net_rate_bits "$FABRIC_RATE") || fail "--shaped: a rate as tc writes it (e.g. 200mbit), not '$FABRIC_RATE'"
fi

TARGETS=(dgx2 dgx3 dgx4 dgx5)
# node_list N: the source and the first N targets, as a JSON list's items.
node_list() {
  local list='"dgx1"' i
  for ((i = 0; i < $1; i++)); do list+=", \"${TARGETS[i]}\""; done
  echo "$list"
}
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

# The image: IMG_MB MiB of random bytes imported on dgx1 (no registry is
# reachable from the nodes); REF its pinned reference, C its image ID.
make_image() {
  echo "== image: $IMG_MB MiB on dgx1"
  D=sha256:$(printf 'fleet fabric bench' | sha256sum | cut -d' ' -f1)
  REF="localhost/fleet/fabbench@$D"
  on_node dgx1 "d=\$(mktemp -d) && head -c $((IMG_MB * 1048576)) /dev/urandom > \$d/blob && tar -C \$d -c blob | $CE import - localhost/fleet/fabbench:sha256-${D#sha256:} >/dev/null && rm -rf \$d"
  C=$(on_node dgx1 "$CE image inspect --format '{{.Id}}' localhost/fleet/fabbench:sha256-${D#sha256:}")
}
img() { printf 'b={"ref": "%s", "source": "node:dgx1", "nodes": [%s]}' "$REF" "$1"; }
ONE='"dgx1", "dgx2"'
ALL='"dgx1", "dgx2", "dgx3", "dgx4", "dgx5"'
rm_image() { for n in "$@"; do on_node "$n" "$CE rmi -f $C >/dev/null 2>&1 || true"; done; }
apply_quiet() { fl apply --auto-approve; }
apply_ctl() { FLEET_FABRIC=off fl apply --auto-approve; }

# The model: ~MODEL_MB MB in 4 shards (mkmodel.py) in dgx1's cache.
make_model() {
  echo "== model: ~$MODEL_MB MB on dgx1 (4 shards)"
  REV=$(printf 'fleet-fabric-bench' | sha1sum | cut -c1-40)
  python3 "$ROOT/tests/integration/mkmodel.py" --cache "$(node_root dgx1)/hf/hub" --repo fleet/bench-model \
    --revision "$REV" --shards 4 --shard-kb $((MODEL_MB * 1000000 / 4 / 1024)) --owner "$(node_field dgx1 user)" >/dev/null
}
mod() { printf 'm={"repo": "fleet/bench-model", "revision": "%s", "source": "node:dgx1", "nodes": [%s]}' "$REV" "$1"; }
rm_model() { for n in "$@"; do rm -rf "$(node_root "$n")/hf/hub/models--fleet--bench-model"; done; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }

# ---- shaped mode: 1, 2 and 4 targets on rate-limited fabric links
FABRIC_IF=enp1s0f1np1
# The nodes' CPU: each node's sshd (and so every session, openssl, podman
# and writer it starts from then on) in a cgroup v2 made for the run;
# cpu.stat's usage_usec counts exited processes too.
NODE_CG=
node_cg_setup() {
  local root n
  root=$(awk '$3 == "cgroup2" { print $2; exit }' /proc/mounts)
  [[ -n $root && -w $root/cgroup.procs ]] || return 0
  NODE_CG=$root/fleet-fabric-bench.$$
  mkdir "$NODE_CG" || { NODE_CG=; return 0; }
  for n in dgx1 "${TARGETS[@]}"; do
    echo "$(node_field "$n" pid)" >"$NODE_CG/cgroup.procs"
    # Docker nodes: the node's dockerd (it imports what `docker load` reads)
    # and what it runs already (containerd), where fleet-sim started one.
    local d=$SIMDIR/nodes/$n/dockerd.pid p
    [[ -r $d ]] || continue
    for p in $(cat "$d") $(pgrep -P "$(cat "$d")" || true); do echo "$p" >"$NODE_CG/cgroup.procs"; done
  done
}
node_cg_cleanup() {
  local p
  [[ -n $NODE_CG && -d $NODE_CG ]] || return 0
  for p in $(cat "$NODE_CG/cgroup.procs" 2>/dev/null); do echo "$p" >"${NODE_CG%/*}/cgroup.procs" 2>/dev/null || true; done
  rmdir "$NODE_CG" 2>/dev/null || true
}
node_cpu_us() { if [[ -n $NODE_CG ]]; then awk '$1 == "usage_usec" { print $2 }' "$NODE_CG/cpu.stat"; else echo 0; fi; }
src_tx() { ip netns exec "$SRC_NS" cat "/sys/class/net/$FABRIC_IF/statistics/tx_bytes"; }
cpu_ticks() { awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 + $9, $5 + $6; exit }' /proc/stat; }  # busy idle
declare -A R_MS=() R_EG=() R_BY=() R_CPU=() R_NCPU=() R_BUSY=()
# shaped_run KIND N PAYLOAD [LABEL]: one apply that copies KIND to N targets
# at once (KIND none: nothing to copy); LABEL (default KIND) names the row.
shaped_run() {
  local kind=$1 n=$2 payload=$3 label=${4:-$1} b0 e0 t0 c0 busy0 idle0 busy1 idle1 rc=0 tf=$WORK/cpu-time ms eg by cpu ncpu busy
  b0=$(ctl_bytes)
  e0=$(src_tx)
  c0=$(node_cpu_us)
  read -r busy0 idle0 < <(cpu_ticks)
  t0=$(now_ms)
  TIMEFORMAT='%3U %3S'
  { time apply_quiet; } 2>"$tf" || rc=$?
  ms=$(($(now_ms) - t0))
  read -r busy1 idle1 < <(cpu_ticks)
  ((rc == 0)) || fail "$label fabric $n targets (shaped)"
  cp "$WORK/out" "$WORK/out.$label.$n"
  eg=$(($(src_tx) - e0))
  by=$(($(ctl_bytes) - b0))
  sleep 0.3  # the nodes' sessions end after fleet closes them
  ncpu=$(awk -v a="$c0" -v b="$(node_cpu_us)" 'BEGIN { printf "%.2f", (b - a) / 1e6 }')
  cpu=$(awk '{ printf "%.2f", $1 + $2 }' "$tf")
  busy=$(awk -v b=$((busy1 - busy0)) -v i=$((idle1 - idle0)) 'BEGIN { printf "%.0f", 100 * b / (b + i) }')
  R_MS[$label $n]=$ms R_EG[$label $n]=$eg R_BY[$label $n]=$by R_CPU[$label $n]=$cpu R_NCPU[$label $n]=$ncpu R_BUSY[$label $n]=$busy
  if [[ $kind == none ]]; then
    printf '  an apply with nothing to copy: %d ms, source egress %d B, controller %d B, CPU fleet %s s + nodes %s s, machine %s%%\n' \
      "$ms" "$eg" "$by" "$cpu" "$ncpu" "$busy"
    return 0
  fi
  printf '  %-9s %d target(s) %7d ms (%sx one; link time %s s)  source egress %11d B = %sx payload  controller %8d B  CPU fleet %s s + nodes %s s  machine %s%%\n' \
    "$label" "$n" "$ms" "$(ratio "$ms" "${R_MS[$kind 1]}")" "$(awk -v e="$eg" -v r="$RATE_BITS" 'BEGIN { printf "%.1f", e * 8 / r }')" \
    "$eg" "$(ratio "$eg" "$payload")" "$by" "$cpu" "$ncpu" "$busy"
  # each target's own step, as fleet reports it
  echo "      steps: $(grep -E "^$kind\.[a-z]+@dgx[2-9]: complete after" "$WORK/out" | sed -E 's/^[a-z]+\.[a-z]+@(dgx[0-9]+): complete after /\1 /' | paste -sd, - | sed 's/,/, /g')"
}
shaped_bench() {
  local n
  echo "== ${#TARGETS[@]}+1 nodes, LAN $LAN_RATE, fabric shaped at $FABRIC_RATE each way per node ($(nproc) cores, load $(cut -d' ' -f1 /proc/loadavg))"
  start_fleet 5 --net lan+fabric --lan-rate "$LAN_RATE" --fabric-rate "$FABRIC_RATE"
  SRC_NS=$(node_field dgx1 netns)
  trap 'cleanup; node_cg_cleanup' EXIT
  node_cg_setup
  [[ -n $NODE_CG ]] || echo "  (no writable cgroup v2: the nodes' CPU reads 0)"
  mkrepo
  fl apply --auto-approve || fail "first apply (node adoption)"
  shaped_run none 0 1
  make_image
  IMG_PAYLOAD=$(on_node dgx1 "$CE save $C | wc -c")
  echo "  payload: the image's $CE save stream, $IMG_PAYLOAD bytes"
  for n in 1 2 4; do
    mkrepo --image "$(img "$(node_list "$n")")"
    shaped_run image "$n" "$IMG_PAYLOAD"
    rm_image "${TARGETS[@]:0:n}"
  done
  # The baseline in the same run: a copy per target (FLEET_FABRIC_CHAIN=off).
  export FLEET_FABRIC_CHAIN=off
  shaped_run image 4 "$IMG_PAYLOAD" image-off
  unset FLEET_FABRIC_CHAIN
  rm_image "${TARGETS[@]}"
  mkrepo  # the image's records go before the model's runs, not in them
  fl apply --auto-approve || fail "apply without the image"
  make_model
  MODEL_PAYLOAD=$(find "$(node_root dgx1)/hf/hub/models--fleet--bench-model/blobs" -type f -printf '%s\n' | awk '{ s += $1 } END { printf "%.0f", s }')
  echo "  payload: the model's files, $MODEL_PAYLOAD bytes"
  for n in 1 2 4; do
    mkrepo --model "$(mod "$(node_list "$n")")"
    shaped_run model "$n" "$MODEL_PAYLOAD"
    rm_model "${TARGETS[@]:0:n}"
  done
  export FLEET_FABRIC_CHAIN=off
  shaped_run model 4 "$MODEL_PAYLOAD" model-off
  unset FLEET_FABRIC_CHAIN
  rm_model "${TARGETS[@]}"

  local k p line
  echo "== table (fabric $FABRIC_RATE, LAN $LAN_RATE, $(nproc) cores)"
  echo "| payload | targets | wall | ratio to 1 target | link time of the egress | source fabric egress | x payload | through the controller | CPU: fleet | CPU: nodes | copy's share of $(nproc) cores | machine CPU busy |"
  echo "|---|---|---|---|---|---|---|---|---|---|---|---|"
  for k in image image-off model model-off; do
    [[ $k == image* ]] && p=$IMG_PAYLOAD || p=$MODEL_PAYLOAD
    for n in 1 2 4; do
      [[ -n ${R_MS[$k $n]-} ]] || continue
      line=$(awk -v ms="${R_MS[$k $n]}" -v one="${R_MS[${k%-off} 1]}" -v eg="${R_EG[$k $n]}" -v p="$p" -v by="${R_BY[$k $n]}" \
        -v r="$RATE_BITS" -v c="${R_CPU[$k $n]}" -v nc="${R_NCPU[$k $n]}" -v cores="$(nproc)" \
        'BEGIN { printf "%.1f s | %.2f | %.1f s | %.1f MB | %.2f | %.0f KB | %.2f s | %.1f s | %.0f %%", ms / 1000, ms / one, eg * 8 / r, eg / 1e6, eg / p, by / 1e3, c, nc, 100 * (c + nc) / (ms / 1000) / cores }')
      printf '| %s %.1f MB | %d | %s | %s %% |\n' "${k/-off/ (a copy per target)}" "$(awk -v p="$p" 'BEGIN { print p / 1e6 }')" "$n" "$line" "${R_BUSY[$k $n]}"
    done
  done
}
if ((SHAPED)); then
  shaped_bench
  exit 0
fi

# ---- unshaped: fabric against the controller's path and sparkrun's way
echo "== ${#TARGETS[@]}+1 nodes, LAN $LAN_RATE, fabric unlimited ($(nproc) cores, load $(cut -d' ' -f1 /proc/loadavg))"
start_fleet 5 --net lan+fabric --lan-rate "$LAN_RATE"
mkrepo
fl apply --auto-approve || fail "first apply (node adoption)"
make_image
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
    on_node dgx1 "$CE save $C | ssh -q -o BatchMode=yes -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -i ~/.ssh/bench_key -p $(node_field "$n" port) $(node_field "$n" user)@$(node_field "$n" fabric_address) $CE load -q" >/dev/null || return 1
  done
}
timed "image sparkrun-way 1 target" sparkrun dgx2
rm_image dgx2
timed "image sparkrun-way 4 targets" sparkrun "${TARGETS[@]}"
on_node dgx1 "rm -f ~/.ssh/bench_key"

make_model
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

echo "== ratios"
for k in image model; do
  echo "  $k: fabric 4/1 targets $(ratio "${MS[$k fabric 4 targets]}" "${MS[$k fabric 1 target]}")x;" \
    "controller/fabric 4 targets $(ratio "${MS[$k controller 4 targets]}" "${MS[$k fabric 4 targets]}")x;" \
    "bytes through the controller per GB over the fabric (4 targets):" \
    "$(awk -v b="${BY[$k fabric 4 targets]}" -v mb=$([[ $k == image ]] && echo $((IMG_MB * 4)) || echo $((MODEL_MB * 4))) 'BEGIN { printf "%.0f", b / (mb / 1000) }')"
done
echo "  image: sparkrun-way 4 targets / fleet fabric 4 targets" \
  "$(ratio "${MS[image sparkrun-way 4 targets]}" "${MS[image fabric 4 targets]}")x"
