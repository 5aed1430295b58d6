#!/usr/bin/env bash
# Nodes with a simulated GPU (fleet-sim start --gpu; tests/sim/README.md): dgx1
# a GB10 (unified memory, nvidia-smi says [N/A]), dgx2 an H200 (discrete). The
# fleet-probe that apply uploads reads the fake CUDA driver; the display RAM
# unlock on dgx1 frees exactly the configured gain, measured by that probe
# before and after the reload and shown by `fleet status`; destroy restores.
source "$(dirname "$0")/lib.sh"

start_fleet 2 --gpu dgx1=gb10,dgx2=h200
MIB=$((1 << 20))
conf() { # conf NODE KEY: a figure of the node's simulated GPU
	sed -n "s/^$2 *= *//p" "$(node_root "$1")/sim/fake-gpu.conf"
}
GB10_TOTAL=$(conf dgx1 total_bytes)
GB10_FREE=$(conf dgx1 free_bytes)
GB10_GAIN=$(conf dgx1 unlock_gain_bytes)
[[ $GB10_TOTAL == 128526893056 && $GB10_FREE == 103401336832 && $GB10_GAIN == 2147483648 ]] ||
	fail "dgx1's fake GPU config: total $GB10_TOTAL free $GB10_FREE gain $GB10_GAIN"
[[ $(conf dgx2 total_bytes) == $((143771 * MIB)) && $(conf dgx2 free_bytes) == $((143000 * MIB)) ]] ||
	fail "dgx2's fake GPU config is not the H200's"

# gpu FIELD: that field of GPU 0 in `fleet probe --json` (in $WORK/out); also
# "source" (where fleet read the GPU facts from).
gpu() {
	python3 - "$WORK/out" "$1" <<'PY'
import json, sys
facts = json.load(open(sys.argv[1]))["gpu"]
field = sys.argv[2]
v = facts[field] if field in ("source", "driver_version", "note") else facts["gpus"][0][field]
print(json.dumps(v) if not isinstance(v, str) else v)
PY
}
record() { # record NODE KEY: an attribute of display_ram.NODE in state
	python3 - "$(state_file)" "$1" "$2" <<'PY'
import json, sys
state = json.load(open(sys.argv[1]))
recs = [r for r in state["resources"] if r["address"] == "display_ram." + sys.argv[2]]
print(json.dumps(recs[0]["attributes"].get(sys.argv[3])) if recs else "no-record")
PY
}
expect_gpu() { # expect_gpu FIELD WANT
	local got
	got=$(gpu "$1") || fail "no GPU field $1"
	[[ $got == "$2" ]] || fail "GPU $1: $got, expected $2"
}

step "before apply: no fleet-probe; nvidia-smi says [N/A] on the GB10 and MiB on the H200"
mkrepo
expect_rc 0 probe dgx1 --json
expect_gpu source nvidia-smi
expect_gpu name "NVIDIA GB10"
expect_gpu memory_free_bytes null
expect_rc 0 probe dgx2 --json
expect_gpu source nvidia-smi
expect_gpu memory_total_bytes $((143771 * MIB))
expect_gpu memory_free_bytes $((143000 * MIB))

step "apply installs probe.<node>; the probe reads the fake CUDA driver"
expect_rc 0 apply --auto-approve
expect_out "probe.dgx1"
expect_rc 0 state show probe.dgx1
expect_out '"method": "upload"'
expect_rc 0 probe dgx1 --json
expect_gpu source fleet-probe
expect_gpu name "NVIDIA GB10"
expect_gpu uuid "GPU-$(cat "$(node_root dgx1)/sim/gpu_uuid")"
expect_gpu compute_capability 12.1
expect_gpu unified_memory true
expect_gpu memory_total_bytes "$GB10_TOTAL"
expect_gpu memory_free_bytes "$GB10_FREE"
expect_gpu processes "[]"
expect_gpu driver_version 580.95.05
expect_rc 0 probe dgx1
expect_out "96.3 GiB free of 119.7 GiB"
expect_rc 0 probe dgx2 --json
expect_gpu source fleet-probe
expect_gpu name "NVIDIA H200"
expect_gpu compute_capability 9.0
expect_gpu unified_memory false
expect_gpu memory_total_bytes $((143771 * MIB))
expect_gpu memory_free_bytes $((143000 * MIB))
expect_rc 0 status
expect_out "96.3 GiB free of 119.7 GiB"
assert_converged

step "unlock dgx1's display RAM: the probe measures the gain before and after"
mkrepo --unlock dgx1
expect_rc 0 apply --auto-approve
[[ $(param dgx1 modeset) == Y && $(param dgx1 fbdev) == N ]] || fail "dgx1 not unlocked"
before=$(record dgx1 gpu_free_before_bytes)
after=$(record dgx1 gpu_free_after_bytes)
[[ $before == "$GB10_FREE" ]] || fail "gpu_free_before_bytes $before, expected $GB10_FREE"
[[ $after == $((GB10_FREE + GB10_GAIN)) ]] ||
	fail "gpu_free_after_bytes $after, expected $((GB10_FREE + GB10_GAIN)) (gain $GB10_GAIN)"
echo "   dgx1 gpu_free before $before after $after: gain $((after - before))"
expect_rc 0 status
expect_out "unlocked (GPU free 96.3 -> 98.3 GiB)"
expect_out "98.3 GiB free of 119.7 GiB"
expect_no_out "gain not measured"
grep -E '^dgx[12] ' "$WORK/out" | sed 's/^/   /'
expect_rc 0 probe dgx1 --json
expect_gpu memory_free_bytes $((GB10_FREE + GB10_GAIN))
expect_rc 0 probe dgx2 --json
expect_gpu memory_free_bytes $((143000 * MIB)) # discrete: no display share to free
assert_converged

step "destroy restores the module, and with it the free memory"
expect_rc 0 destroy --auto-approve
[[ $(param dgx1 modeset) == N && $(param dgx1 fbdev) == Y ]] || fail "dgx1 not back to N/Y"
expect_rc 0 probe dgx1 --json
expect_gpu memory_free_bytes "$GB10_FREE"
expect_rc 0 state list
expect_no_out "display_ram"
no_crash
echo PASS
