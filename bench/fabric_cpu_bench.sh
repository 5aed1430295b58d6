#!/usr/bin/env bash
# The CPU cost per byte of fleet's node-to-node fabric copy (issue 31:
# "Several streams where one would bind"), against the AES-GCM limit of one
# core measured in the same run.
#
# A 2-node simulated fleet on two networks (fleet-sim --net lan+fabric, the
# fabric not shaped); a ~MODEL_MB MB model (mkmodel.py, 4 shards) in dgx1's
# hub cache, declared on dgx1 and dgx2 with source node:dgx1; each apply
# copies it dgx1 -> dgx2 over the fabric (openssl s_client -> s_server,
# TLS 1.3 PSK, TLS_AES_128_GCM_SHA256, then the target's verify hash), with
# FLEET_MODEL_COPY_STREAMS (docs/cli.md) files at once: 1, then fleet's
# default (unset: 2, providers/model/model_provider.h). Per copy: wall time,
# payload, the nodes' CPU (each node's sshd, and so every session, openssl,
# cat and hasher it starts, in a cgroup v2 of its own: source and target
# apart), fleet's own CPU (user+sys of the apply), the streams (fleet's
# "N stream(s) at once" where it says so, else the configured value, marked
# so), and the fixed part: a converged apply right after (nothing to copy).
# Beside it: `openssl speed -evp aes-128-gcm -bytes 16384` (one core, CPU
# time, three samples over the run) and the target's verify hash
# (`openssl dgst -sha256` over the copied blobs, timed apart). It prints bytes per node
# CPU-second (both ends, and per end), the ratio to one core's AES-GCM, and a
# projection to two 20-core GB10 nodes on a 200 Gb/s link that scales this
# machine's per-core figures (a projection, not a measurement).
#
# Usage: bash bench/fabric_cpu_bench.sh [model MB]   (default 1000; root,
#        after scripts/build.sh; FLEET= another build; ~3 min at 1000)
set -euo pipefail
MODEL_MB=${1:-1000}
[[ $MODEL_MB =~ ^[0-9]+$ && $MODEL_MB -ge 4 ]] || { echo "usage: $0 [model MB >= 4]" >&2; exit 2; }
# shellcheck source=tests/integration/lib.sh
source "$(dirname "$0")/../tests/integration/lib.sh"

LINK_BPS=25000000000  # 200 Gb/s in bytes per second
SPARK_CORES=20        # GB10: 10 Cortex-X925 + 10 Cortex-A725
now_ms() { echo $((${EPOCHREALTIME/./} / 1000)); }
ctl_bytes() { "$SIM" net-stats "$SIMDIR" | awk -F= '{s += $2} END {printf "%.0f\n", s}'; }
cpu_ticks() { awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 + $9, $5 + $6; exit }' /proc/stat; }  # busy idle
loadavg() { cut -d' ' -f1-3 /proc/loadavg; }
fmt() { awk -v x="$1" -v d="${2:-2}" 'BEGIN { printf "%.*f", d, x }'; }

# ---- the nodes' CPU: each node's sshd in a cgroup v2 of its own, under one
# made for the run (no controller enabled: cpu.stat's usage_usec is the
# core's own accounting and counts exited processes too).
CG=
declare -A CG_FROM=()
node_cg_setup() {
  local root n pid
  root=$(awk '$3 == "cgroup2" { print $2; exit }' /proc/mounts)
  [[ -n $root && -w $root/cgroup.procs ]] || return 0
  CG=$root/fleet-fabric-cpu-bench.$$
  mkdir "$CG" || { CG=; return 0; }
  for n in dgx1 dgx2; do
    pid=$(node_field "$n" pid)
    CG_FROM[$n]=$root$(awk -F: '$1 == "0" { print $3 }' "/proc/$pid/cgroup")
    if ! { mkdir "$CG/$n" && echo "$pid" >"$CG/$n/cgroup.procs"; }; then
      node_cg_cleanup
      CG=
      return 0
    fi
  done
}
node_cg_cleanup() {
  local n p
  [[ -n $CG && -d $CG ]] || return 0
  for n in dgx1 dgx2; do
    [[ -d $CG/$n ]] || continue
    while read -r p; do
      echo "$p" >"${CG_FROM[$n]:-${CG%/*}}/cgroup.procs" 2>/dev/null || echo "$p" >"${CG%/*}/cgroup.procs" 2>/dev/null || true
    done <"$CG/$n/cgroup.procs"
    rmdir "$CG/$n" 2>/dev/null || true
  done
  rmdir "$CG" 2>/dev/null || true
}
node_cpu_us() { if [[ -n $CG ]]; then awk '$1 == "usage_usec" { print $2 }' "$CG/$1/cpu.stat"; else echo 0; fi; }

# ---- one core's AES-128-GCM (openssl speed counts CPU time: bytes per
# CPU-second), 16 KiB blocks, the size of a TLS record
SPEED=()
aes_speed() {
  local s
  s=$(openssl speed -evp aes-128-gcm -seconds 2 -bytes 16384 -mr 2>/dev/null | awk -F: '/^\+F:/ { print $4 }')
  [[ -n $s ]] || s=$(openssl speed -evp aes-128-gcm -seconds 2 -mr 2>/dev/null | awk -F: '/^\+F:/ { print $NF }')  # 16 KiB is the last size
  [[ -n $s ]] || fail "openssl speed -evp aes-128-gcm"
  SPEED+=("$s")
  echo "  openssl speed -evp aes-128-gcm, 16 KiB blocks, one core: $(fmt "$(awk -v s="$s" 'BEGIN { print s / 1e6 }')" 0) MB per CPU-second (load $(loadavg))"
}

# ---- the model
make_model() {
  REV=$(printf 'fleet-fabric-cpu-bench' | sha1sum | cut -c1-40)
  python3 "$ROOT/tests/integration/mkmodel.py" --cache "$(node_root dgx1)/hf/hub" --repo fleet/bench-model \
    --revision "$REV" --shards 4 --shard-kb $((MODEL_MB * 1000000 / 4 / 1024)) --owner "$(node_field dgx1 user)" >/dev/null
  PAYLOAD=$(find "$(node_root dgx1)/hf/hub/models--fleet--bench-model/blobs" -type f -printf '%s\n' | awk '{ s += $1 } END { printf "%.0f", s }')
  NFILES=$(find "$(node_root dgx1)/hf/hub/models--fleet--bench-model/blobs" -type f | wc -l)
}
mod() { printf 'm={"repo": "fleet/bench-model", "revision": "%s", "source": "node:dgx1", "nodes": [%s]}' "$REV" "$1"; }
target_bytes() { find "$(node_root dgx2)/hf/hub/models--fleet--bench-model/blobs" -type f -printf '%s\n' 2>/dev/null | awk '{ s += $1 } END { printf "%.0f", s }'; }

# measured_apply LABEL: one `fleet apply`, with its wall time, fleet's CPU,
# each node's CPU, the bytes through the controller and the machine's busy
# share; sets M_* for LABEL.
declare -A M_MS=() M_FL=() M_SRC=() M_DST=() M_CTL=() M_BUSY=() M_LOAD=()
measured_apply() {
  local label=$1 t0 s0 d0 b0 busy0 idle0 busy1 idle1 rc=0 tf=$WORK/cpu-time
  M_LOAD[$label]=$(loadavg)
  b0=$(ctl_bytes)
  s0=$(node_cpu_us dgx1)
  d0=$(node_cpu_us dgx2)
  read -r busy0 idle0 < <(cpu_ticks)
  t0=$(now_ms)
  TIMEFORMAT='%3U %3S'
  { time fl apply --auto-approve; } 2>"$tf" || rc=$?
  M_MS[$label]=$(($(now_ms) - t0))
  read -r busy1 idle1 < <(cpu_ticks)
  ((rc == 0)) || fail "$label: fleet apply"
  cp "$WORK/out" "$WORK/out.$label"
  sleep 0.3  # the nodes' sessions end after fleet closes them
  M_SRC[$label]=$(awk -v a="$s0" -v b="$(node_cpu_us dgx1)" 'BEGIN { printf "%.3f", (b - a) / 1e6 }')
  M_DST[$label]=$(awk -v a="$d0" -v b="$(node_cpu_us dgx2)" 'BEGIN { printf "%.3f", (b - a) / 1e6 }')
  M_FL[$label]=$(awk '{ printf "%.3f", $1 + $2 }' "$tf")
  M_CTL[$label]=$(($(ctl_bytes) - b0))
  M_BUSY[$label]=$(awk -v b=$((busy1 - busy0)) -v i=$((idle1 - idle0)) 'BEGIN { printf "%.0f", 100 * b / (b + i) }')
}

# copy_run STREAMS: the copy with FLEET_MODEL_COPY_STREAMS=STREAMS ("default":
# unset), then a converged apply (the fixed part), then dgx2's copy removed.
declare -A R_STREAMS=()
copy_run() {
  local want=$1 label="streams-$1" said got
  if [[ $want == default ]]; then unset FLEET_MODEL_COPY_STREAMS; else export FLEET_MODEL_COPY_STREAMS=$want; fi
  rm -rf "$(node_root dgx2)/hf/hub/models--fleet--bench-model"
  measured_apply "$label"
  got=$(target_bytes)
  [[ $got == "$PAYLOAD" ]] || fail "$label: dgx2 has $got bytes of blobs, not $PAYLOAD"
  ((M_CTL[$label] < PAYLOAD / 10)) || fail "$label: ${M_CTL[$label]} bytes crossed the controller: not over the fabric"
  said=$(grep -oE '[0-9]+ stream\(s\) at once' "$WORK/out.$label" | head -n1 | cut -d' ' -f1 || true)
  if [[ -n $said ]]; then
    R_STREAMS[$label]="$said (fleet's output)"
  elif [[ $want == default ]]; then
    R_STREAMS[$label]="2 (configured: fleet's default; its output does not say)"
  else
    R_STREAMS[$label]="$want (configured: FLEET_MODEL_COPY_STREAMS; its output does not say)"
  fi
  measured_apply "$label-fixed"
  grep -q "No changes" "$WORK/out.$label-fixed" || fail "$label: the apply after the copy was not converged"
  unset FLEET_MODEL_COPY_STREAMS
  printf '  %-16s %6d ms  nodes CPU %s s (source dgx1 %s s, target dgx2 %s s)  fleet %s s  machine %s%% busy  streams %s\n' \
    "$label" "${M_MS[$label]}" "$(awk -v a="${M_SRC[$label]}" -v b="${M_DST[$label]}" 'BEGIN { printf "%.2f", a + b }')" \
    "${M_SRC[$label]}" "${M_DST[$label]}" "${M_FL[$label]}" "${M_BUSY[$label]}" "${R_STREAMS[$label]}"
  printf '  %-16s %6d ms  nodes CPU %s s (source %s s, target %s s)  fleet %s s  (a converged apply: the fixed part)\n' \
    "  then converged" "${M_MS[$label-fixed]}" "$(awk -v a="${M_SRC[$label-fixed]}" -v b="${M_DST[$label-fixed]}" 'BEGIN { printf "%.2f", a + b }')" \
    "${M_SRC[$label-fixed]}" "${M_DST[$label-fixed]}" "${M_FL[$label-fixed]}"
}

# ---- run
CORES=$(nproc)
echo "== fabric copy CPU per byte: 2 nodes, fabric unshaped, model ~$MODEL_MB MB; $CORES cores ($(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)), load $(loadavg)"
start_fleet 2 --net lan+fabric
trap 'cleanup; node_cg_cleanup' EXIT
node_cg_setup
[[ -n $CG ]] || echo "  (no writable cgroup v2: the nodes' CPU reads 0)"
mkrepo
fl apply --auto-approve || fail "first apply (node adoption)"
make_model
echo "  payload: $NFILES files, $PAYLOAD bytes in dgx1's cache"
mkrepo --model "$(mod '"dgx1", "dgx2"')"
aes_speed
copy_run 1
aes_speed
copy_run default
aes_speed

# The target's verify hash apart: what the copy runs on dgx2 after each
# file arrives (`openssl dgst -sha256 -r < FILE` for LFS blobs, sha256sum
# on a node without openssl; providers/model/fabric_copy.cc), over the same
# blobs (the last copy's, page-cached), user+sys.
TIMEFORMAT='%3U %3S'
HASH_CPU=$({ time find "$(node_root dgx2)/hf/hub/models--fleet--bench-model/blobs" -type f -size +1M -exec sh -c 'for f; do openssl dgst -sha256 -r <"$f"; done' sh {} + >/dev/null; } 2>&1 | awk '{ printf "%.3f", $1 + $2 }')
HASH_BYTES=$(find "$(node_root dgx2)/hf/hub/models--fleet--bench-model/blobs" -type f -size +1M -printf '%s\n' | awk '{ s += $1 } END { printf "%.0f", s }')
echo "  the target's verify hash apart: openssl dgst -sha256 over $HASH_BYTES bytes: $HASH_CPU CPU-s ($(fmt "$(awk -v b="$HASH_BYTES" -v c="$HASH_CPU" 'BEGIN { print b / c / 1e6 }')" 0) MB per CPU-second)"

AES=$(printf '%s\n' "${SPEED[@]}" | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }')  # the median
AES_RANGE=$(printf '%s\n' "${SPEED[@]}" | sort -g | awk '{ v[NR] = $1 / 1e6 } END { printf "%.0f-%.0f", v[1], v[NR] }')

echo "== figures ($CORES cores, load $(loadavg) at the end)"
echo "  what shares the $CORES cores: fleet (the controller), both simulated nodes (their sshd, cat, openssl s_client/s_server,"
echo "  the target's writer and hasher) and every other process on this machine (the machine busy column counts all of it)"
echo "  one core's AES-128-GCM (openssl speed, 16 KiB blocks, per CPU-second): median $(fmt "$(awk -v s="$AES" 'BEGIN { print s / 1e6 }')" 0) MB/s (samples $AES_RANGE)"
echo
echo "| streams | wall | wall throughput | fleet CPU | nodes CPU: source / target / both | both, net of a converged apply | payload per node CPU-s (both ends) | / one core's AES-GCM | per source CPU-s (net) | per target CPU-s (net) | machine busy | load at start |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|"
for label in streams-1 streams-default; do
  awk -v p="$PAYLOAD" -v ms="${M_MS[$label]}" -v fl="${M_FL[$label]}" -v s="${M_SRC[$label]}" -v d="${M_DST[$label]}" \
    -v fs="${M_SRC[$label-fixed]}" -v fd="${M_DST[$label-fixed]}" -v aes="$AES" -v busy="${M_BUSY[$label]}" \
    -v st="${R_STREAMS[$label]}" -v load="${M_LOAD[$label]}" \
    'BEGIN { both = s + d; net = both - fs - fd; ns = s - fs; nd = d - fd
             printf "| %s | %.2f s | %.0f MB/s | %.2f s | %.2f / %.2f / %.2f s | %.2f s | %.0f MB/s | %.3f | %.0f MB/s | %.0f MB/s | %s %% | %s |\n",
               st, ms / 1000, p / ms / 1e3, fl, s, d, both, net, p / both / 1e6, p / both / aes, p / ns / 1e6, p / nd / 1e6, busy, load }'
done

echo
echo "== projection (NOT a measurement): two $SPARK_CORES-core GB10 nodes on a 200 Gb/s link ($LINK_BPS B/s)"
echo "  scales this machine's per-core figures above (net of the fixed apply, streams = fleet's default) as if a GB10 core"
echo "  were one of these; per end from each node's own cgroup (source = dgx1, target = dgx2, measured apart), then the two"
echo "  ends' sum split in half, then the target less its verify hash"
awk -v p="$PAYLOAD" -v s="${M_SRC[streams-default]}" -v d="${M_DST[streams-default]}" \
  -v fs="${M_SRC[streams-default-fixed]}" -v fd="${M_DST[streams-default-fixed]}" -v hc="$HASH_CPU" -v hb="$HASH_BYTES" \
  -v link="$LINK_BPS" -v cores="$SPARK_CORES" -v aes="$AES" '
  function line(what, src, dst,   cs, cd, worst, streams) {
    cs = link / src; cd = link / dst; worst = cs > cd ? cs : cd
    streams = worst == int(worst) ? worst : int(worst) + 1
    printf "  %s:\n    source %.0f MB/CPU-s (%.3f of one core'"'"'s AES-GCM) -> %.1f cores; target %.0f MB/CPU-s (%.3f) -> %.1f cores;\n    streams needed (one TLS stream per core at most): >= %d; %d cores per end %s\n",
      what, src / 1e6, src / aes, cs, dst / 1e6, dst / aes, cd, streams, cores, worst <= cores ? "suffice" : "do NOT suffice"
  }
  BEGIN {
    ns = s - fs; nd = d - fd
    line("per end as measured (the target includes its verify hash)", p / ns, p / nd)
    line("both ends'"'"' CPU split in half (the sim'"'"'s veth may charge the receiver'"'"'s TCP work to the sender)", 2 * p / (ns + nd), 2 * p / (ns + nd))
    ndh = nd - hc * p / hb
    if (ndh > 0) line("target without its verify hash (hash CPU measured apart, subtracted)", p / ns, p / ndh)
    printf "  the floor, one AES-GCM pass per byte per end at openssl speed'"'"'s rate: %.1f cores per end\n", link / aes
  }'
