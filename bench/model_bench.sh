#!/usr/bin/env bash
# Benchmarks for the model issue, each figure against a baseline measured in
# the same run over the same files (this machine is noisy and shared):
#   1. deep verify: fleet's hashing vs `sha256sum` over the same >= 1 GB of
#      blobs (target >= 0.9x):
#        a. `fleet apply --verify=deep` on a simulated node (the installed
#           fleet-probe's --sha256 on the node, else openssl dgst; the output
#           names which), the step as the operator runs it;
#        b. fleet's in-process OpenSSL EVP hasher (what runs for a node whose
#           address is `local`, and what checks every blob streamed while
#           staging), 1 and 2 threads (bench/model_hash_bench).
#   2. staging node to node: `fleet apply` copying the model from dgx1 to
#      dgx2 through the controller vs a bare `ssh dgx1 tar | ssh dgx2 tar`
#      of the same files (OpenSSH, default ciphers; rsync is not installed)
#      (target >= 0.8x).
# Files are hot in the page cache for every contender (warmed first): the
# figures compare CPU and transport, not the disk.
# Usage: bash bench/model_bench.sh [runs] [shard-MB]   (root, after a build)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$ROOT/build}
FLEET=${FLEET:-$BUILD/src/engine/fleet}
HASHER=${HASHER:-$BUILD/bench/model_hash_bench}
SIM=$ROOT/tests/sim/fleet-sim
RUNS=${1:-3}
# 1 GiB shards by default: with 256 MiB ones the hashing takes ~0.27 s, and
# the ssh round trip and the hashers' start move its ratio by 0.05 from run to
# run (real shards are up to 5 GB).
SHARD_MB=${2:-1024}
WORK=$(mktemp -d /var/tmp/fleet-model-bench.XXXXXX)
SIMDIR=$WORK/sim
REPO=$WORK/repo
trap '"$SIM" stop "$SIMDIR" --purge >/dev/null 2>&1 || true; rm -rf "$WORK"' EXIT

REV=$(printf 'fleet-model-bench' | sha1sum | cut -c1-40)
DM=models--org--bench-model
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
now() { date +%s.%N; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", a / b}'; }
mbps() { awk -v b="$1" -v s="$2" 'BEGIN {printf "%.0f", b / s / 1e6}'; }
sim_field() { python3 -c 'import json,sys; print([n[sys.argv[2]] for n in json.load(open(sys.argv[1]))["nodes"] if n["name"]==sys.argv[3]][0])' "$SIMDIR/sim.json" "$1" "$2"; }
root_of() { sim_field root "$1"; }
fl() { "$FLEET" -C "$REPO" --no-color "$@" </dev/null; }
mkrepo() {  # mkrepo NODES [SOURCE]
  python3 "$ROOT/tests/integration/mkrepo.py" --sim "$SIMDIR" --out "$REPO" --model \
    'm={"repo": "org/bench-model", "revision": "'$REV'", "source": "'"${2:-node:dgx1}"'", "nodes": ['"$1"']}'
}
# Seconds of the model step on NODE in an apply's output.
step_seconds() { sed -n "s/^model\.m@$1: complete after \([0-9.]*\)s$/\1/p" | tail -1; }

"$SIM" start "$SIMDIR" --nodes 2 >/dev/null
echo "model: 3 shards x $SHARD_MB MB on dgx1 (+ index, config, tokenizer, draft shard)"
python3 "$ROOT/tests/integration/mkmodel.py" --cache "$(root_of dgx1)/hf/hub" --repo org/bench-model \
  --revision "$REV" --shards 3 --shard-kb $((SHARD_MB * 1024)) --owner "$(sim_field user dgx1)" >/dev/null
BLOBS1=$(root_of dgx1)/hf/hub/$DM/blobs
BYTES=$(du -sb --apparent-size "$BLOBS1" | cut -f1)
echo "       $(awk -v b="$BYTES" 'BEGIN {printf "%.2f GB", b / 1e9}') of blobs"
mkrepo ''
fl apply --auto-approve >/dev/null  # node identities, fleet-probe, dgx1 verified as the source

# --- 2. staging node to node -------------------------------------------------
ssh_to() {
  local n=$1
  shift
  ssh -q -o BatchMode=yes -o StrictHostKeyChecking=yes -o UserKnownHostsFile="$SIMDIR/known_hosts" \
    -i "$SIMDIR/id_ed25519" -p "$(sim_field port "$n")" "$(sim_field user "$n")@127.0.0.1" "$@"
}
wipe_dgx2() {
  rm -rf "$(root_of dgx2)/hf/hub/$DM" "$(root_of dgx2)/hf/bare"
  fl state rm model.m@dgx2 >/dev/null 2>&1 || true
}
cat "$BLOBS1"/* >/dev/null
bare_pipe() {  # bare_pipe [ssh options]: the same files, OpenSSH tar pipe through this host
  wipe_dgx2
  local t0
  t0=$(now)
  ssh_to dgx1 "$@" "tar -C /srv/hf/hub -cf - $DM" |
    ssh_to dgx2 "$@" "mkdir -p /srv/hf/bare && tar -C /srv/hf/bare -xf -"
  awk -v a="$t0" -v b="$(now)" 'BEGIN {printf "%.2f\n", b - a}'
}
fleet_stage() {  # fleet_stage STREAMS: seconds of the model step
  wipe_dgx2
  local out s
  out=$(FLEET_MODEL_COPY_STREAMS=$1 fl apply --auto-approve)
  s=$(step_seconds dgx2 <<<"$out")
  [[ -n $s ]] || { echo "$out" >&2; exit 1; }
  cmp -s "$(root_of dgx1)/hf/hub/$DM/snapshots/$REV/model-00002-of-00003.safetensors" \
    "$(root_of dgx2)/hf/hub/$DM/snapshots/$REV/model-00002-of-00003.safetensors" || { echo "copy differs" >&2; exit 1; }
  echo "$s"
}
fleet_copy=() fleet_copy1=() bare_copy=() bare_gcm=()
mkrepo '"dgx2"'
for ((i = 0; i < RUNS; i++)); do
  bare_copy+=("$(bare_pipe)")
  fleet_copy+=("$(fleet_stage 2)")
  bare_gcm+=("$(bare_pipe -c aes128-gcm@openssh.com)")
  fleet_copy1+=("$(fleet_stage 1)")
done
fc=$(printf '%s\n' "${fleet_copy[@]}" | median)
fc1=$(printf '%s\n' "${fleet_copy1[@]}" | median)
bc=$(printf '%s\n' "${bare_copy[@]}" | median)
bg=$(printf '%s\n' "${bare_gcm[@]}" | median)
echo
echo "staging dgx1 -> dgx2 (median of $RUNS; fleet's step includes probing the source, the lock,"
echo "hashing every blob on the way and reading every safetensors header after)"
echo "  fleet apply (model step), 2 streams (default): ${fc}s  $(mbps "$BYTES" "$fc") MB/s   runs: ${fleet_copy[*]}"
echo "  fleet apply (model step), 1 stream:            ${fc1}s  $(mbps "$BYTES" "$fc1") MB/s   runs: ${fleet_copy1[*]}"
echo "  ssh dgx1 tar | ssh dgx2 tar (default cipher):  ${bc}s  $(mbps "$BYTES" "$bc") MB/s   runs: ${bare_copy[*]}"
echo "  the same with -c aes128-gcm@openssh.com:       ${bg}s  $(mbps "$BYTES" "$bg") MB/s   runs: ${bare_gcm[*]}"
echo "  ratio fleet / bare pipe (default cipher):      $(ratio "$bc" "$fc")   (target >= 0.8)"
echo "  ratio fleet / bare pipe (aes128-gcm):          $(ratio "$bg" "$fc")"
echo "  ratio fleet 1 stream / bare pipe (aes128-gcm): $(ratio "$bg" "$fc1")"

# --- 1. deep verify -------------------------------------------------------------
BLOBS2=$(root_of dgx2)/hf/hub/$DM/blobs
cat "$BLOBS2"/* >/dev/null
# Only dgx2's copy in scope (a source node would be verified at the same
# time, on the same two cores): the same record, declared from the hub.
mkrepo '"dgx2"' hub
fleet_deep=() fleet_hash=() cpu=() sum1=() sum2=() evp1=() evp2=() speed=()
# OpenSSL's own per-core SHA-256 limit (16 MiB blocks, one process), and the
# cores a deep verify can use: min(cores, files hashed at once, blobs).
NBLOBS=$(find "$BLOBS2" -maxdepth 1 -type f -size +1M | wc -l)
for ((i = 0; i < RUNS; i++)); do
  t0=$(now)
  sha256sum "$BLOBS2"/* >/dev/null
  sum1+=("$(awk -v a="$t0" -v b="$(now)" 'BEGIN {print b - a}')")
  t0=$(now)
  printf '%s\0' "$BLOBS2"/* | xargs -0 -n 1 -P 2 sha256sum >/dev/null
  sum2+=("$(awk -v a="$t0" -v b="$(now)" 'BEGIN {print b - a}')")
  out=$(fl apply --auto-approve --verify=deep)
  s=$(step_seconds dgx2 <<<"$out")
  [[ -n $s ]] || { echo "$out" >&2; exit 1; }
  fleet_deep+=("$s")
  # MB/s as the node's line gives it: its seconds are rounded to 0.01.
  h=$(sed -n 's/.*deep verify: .*hashed [0-9]* MB in [0-9.]* s (\([0-9]*\) MB\/s.*/\1/p' <<<"$out" | tail -1)
  [[ $h =~ ^[1-9][0-9]*$ ]] || { echo "no 'hashed ... MB in ... s' in the apply's output:" >&2; echo "$out" >&2; exit 1; }
  fleet_hash+=("$h")
  # What the node reported: hashers at once, and their CPU (user+sys).
  at_once=$(sed -n 's/.*deep verify: .*hashed .* s ([0-9]* MB\/s, \([0-9]*\) files at once.*/\1/p' <<<"$out" | tail -1)
  cpu+=("$(sed -n 's/.*deep verify: .*; \([0-9.]*\) s CPU on the node.*/\1/p' <<<"$out" | tail -1)")
  # Which program hashed the sha256 blobs on the node (fleet-probe, openssl dgst, sha256sum).
  hasher=$(sed -n 's/.*deep verify: .* files at once by \([^;)]*\)[;)].*/\1/p' <<<"$out" | tail -1)
  speed+=("$(openssl speed -seconds 2 -bytes 16777216 -evp sha256 2>/dev/null |
    awk '/^sha256/ {v=$NF; sub(/k$/, "", v); print v * 1000 / 1e6}')")
  evp1+=("$("$HASHER" 1 "$BLOBS2"/* | cut -d' ' -f2)")
  evp2+=("$("$HASHER" 2 "$BLOBS2"/* | cut -d' ' -f2)")
done
s1=$(printf '%s\n' "${sum1[@]}" | median)
s2=$(printf '%s\n' "${sum2[@]}" | median)
fd=$(printf '%s\n' "${fleet_deep[@]}" | median)
e1=$(printf '%s\n' "${evp1[@]}" | median)
e2=$(printf '%s\n' "${evp2[@]}" | median)
fh=$(printf '%s\n' "${fleet_hash[@]}" | median)
sp=$(printf '%s\n' "${speed[@]}" | median)
fc=$(printf '%s\n' "${cpu[@]}" | median)
CORES_USED=$(( $(nproc) < at_once ? $(nproc) : at_once ))
(( NBLOBS < CORES_USED )) && CORES_USED=$NBLOBS
limit=$(awk -v a="$sp" -v c="$CORES_USED" 'BEGIN {printf "%.0f", a * c}')
echo
echo "deep verify of the same blobs on dgx2 (median of $RUNS)"
echo "  sha256sum (one process):                ${s1}s  $(mbps "$BYTES" "$s1") MB/s"
echo "  sha256sum, 2 files at a time (xargs -P2): ${s2}s  $(mbps "$BYTES" "$s2") MB/s"
echo "  fleet apply --verify=deep (model step):  ${fd}s  $(mbps "$BYTES" "$fd") MB/s   runs: ${fleet_deep[*]}"
echo "  fleet EVP hasher, 1 thread:              ${e1}s  $(mbps "$BYTES" "$e1") MB/s"
echo "  fleet EVP hasher, 2 threads:             ${e2}s  $(mbps "$BYTES" "$e2") MB/s"
echo "  of which hashing on the node:           $(awk -v b="$BYTES" -v r="$fh" 'BEGIN {printf "%.2f", b / 1e6 / r}')s  ${fh} MB/s   runs (MB/s): ${fleet_hash[*]}"
echo "  hasher on the node:                      ${hasher:-not reported}"
echo "  openssl speed sha256, one core:          ${sp} MB/s   (16 MiB blocks, median of $RUNS)"
echo "  limit = one core x $CORES_USED cores used:        ${limit} MB/s   (cores $(nproc), $at_once files at once, $NBLOBS blobs)"
echo "  ratio fleet hashing / limit (wall):      $(awk -v r="$fh" -v l="$limit" 'BEGIN {printf "%.2f", r / l}')   (target >= 0.8)"
echo "  node CPU of the hashing (user+sys):      ${fc}s   runs: ${cpu[*]}"
echo "  ratio MB per node CPU-second / one core: $(awk -v b="$BYTES" -v s="$fc" -v l="$sp" 'BEGIN {printf "%.2f", b / s / 1e6 / l}')   (load-independent: what the hashers lose to reads and start-up)"
echo "  ratio fleet apply / sha256sum:           $(ratio "$s1" "$fd")   (target >= 0.9)"
echo "  ratio EVP 1 thread / sha256sum:          $(ratio "$s1" "$e1")"
echo "  ratio EVP 2 threads / sha256sum -P2:     $(ratio "$s2" "$e2")"
