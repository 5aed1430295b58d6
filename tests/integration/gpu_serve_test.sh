#!/usr/bin/env bash
# GPUs in serves (recipe gpus / ipc / ulimits) on a mixed fleet:
# - dgx1 (docker, GPU toolkit stand-in): gpus = "all" reaches the NVIDIA
#   hook (NVIDIA_VISIBLE_DEVICES=all in the OCI bundle), ipc = "host" and
#   the stack ulimit reach the container;
# - dgx2 (podman, CDI spec): gpus = "all" is the CDI device nvidia.com/gpu=all;
# - dgx3 (docker, no GPU toolkit): the plan refuses the serve and says what
#   to install, exit 1, nothing started;
# - while serves run, no plan or `fleet probe` creates a CUDA context (the
#   fake libcuda records each one); `fleet probe --gpu` and a plan without a
#   serve do; `-v` prints each node's probe wall time.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/registry.sh"
command -v dockerd >/dev/null || { echo "SKIP: dockerd not installed (apt-get install docker.io)"; exit 77; }

P1=$(free_port)
P2=$(free_port)
P3=$(free_port)
step "registry, image, dgx1 docker+GPU, dgx2 podman+GPU, dgx3 docker without GPU"
registry_start
R=$REGISTRY
D=$(image_push fleet/gpu v1)
start_fleet 3 --insecure-registry "$R" --engine dgx1=docker,dgx2=podman,dgx3=docker \
  --gpu dgx1=gb10,dgx2=gb10
mkdir -p "$REPO/recipes"
# sh traps TERM: as PID 1 of a docker container, httpd would ignore it and
# every stop would wait out its 30 s.
serve='busybox mkdir -p /www/v1 && echo ok > /www/v1/models && env > /www/v1/env && (ulimit -s > /www/v1/stack) && { busybox httpd -f -p {port} -h /www & pid=$!; trap "kill $pid; exit 0" TERM; wait $pid; }'
recipe() {  # recipe FILE EXTRA-TOML
  cat >"$REPO/recipes/$1" <<TOML
model = ""
args = ["sh", "-c", $(python3 -c 'import json,sys; print(json.dumps(sys.argv[1]))' "$serve")]
$2
TOML
}
recipe docker.toml $'gpus = "all"\nipc = "host"\nulimits = {stack = 67108864}'
recipe podman.toml $'gpus = "all"\nulimits = {stack = 67108864}'
dep() {  # dep NAME RECIPE NODE PORT
  printf '%s={"recipe": "recipes/%s", "nodes": ["%s"], "image": "bb", "port": %s, "health": {"path": "/v1/models", "timeout": "20s"}}' "$@"
}
IMG="bb={\"ref\": \"$R/fleet/gpu@$D\", \"source\": \"registry\"}"

step "a docker node without the GPU toolkit: plan error naming the fix, nothing started"
mkrepo --image "$IMG" --deployment "$(dep g3 docker.toml dgx3 "$P3")"
expect_rc 0 validate
expect_rc 1 plan
expect_out 'deployment.g3@dgx3: gpus = "all": docker on dgx3 cannot give GPUs'
expect_out "nvidia-container-toolkit"
expect_rc 1 apply --auto-approve
ce_exists dgx3 container fleet-g3 && fail "fleet-g3 was created on dgx3"

step "docker: gpus = all reaches the GPU hook; podman: the CDI device"
mkrepo --image "$IMG" --deployment "$(dep g1 docker.toml dgx1 "$P1")" \
  --deployment "$(dep g2 podman.toml dgx2 "$P2")"
expect_rc 2 plan --detailed-exitcode
expect_out '--gpus=all'
expect_out 'nvidia.com/gpu=all'
expect_rc 0 apply --auto-approve
hook_log=$(node_root dgx1)/sim/gpu-hook.log
id1=$(ce dgx1 container inspect --format "'{{.Id}}'" fleet-g1)
grep -q "prestart id=$id1 NVIDIA_VISIBLE_DEVICES=all\$" "$hook_log" ||
  fail "the GPU hook did not see fleet-g1 ask for all GPUs: $(cat "$hook_log" 2>&1)"
[[ $(ce dgx1 container inspect --format "'{{.HostConfig.IpcMode}}'" fleet-g1) == host ]] || fail "ipc not host"
[[ $(curl -s "http://127.0.0.1:$P1/v1/stack") == 65536 ]] || fail "stack ulimit: $(curl -s "http://127.0.0.1:$P1/v1/stack")"
curl -s "http://127.0.0.1:$P2/v1/env" | grep -qx 'FLEET_SIM_CDI_DEVICE=nvidia.com/gpu=all' ||
  fail "podman's serve did not get the CDI device: $(curl -s "http://127.0.0.1:$P2/v1/env")"
[[ $(curl -s "http://127.0.0.1:$P2/v1/stack") == 65536 ]] || fail "podman stack ulimit"
assert_converged

step "while the serves run, a plan creates no CUDA context; -v prints each node's probe time"
# The fake libcuda records every context created (fake-gpu.conf context_log).
ctx1=$(node_root dgx1)/sim/cuda-contexts.log
ctx2=$(node_root dgx2)/sim/cuda-contexts.log
# emptied as the node user, who appends to it
on_node dgx1 ': >/srv/sim/cuda-contexts.log'
on_node dgx2 ': >/srv/sim/cuda-contexts.log'
expect_rc 0 -v plan --detailed-exitcode
[[ ! -s $ctx1 && ! -s $ctx2 ]] ||
  fail "a plan created a CUDA context under a serve: dgx1: $(cat "$ctx1") dgx2: $(cat "$ctx2")"
for n in dgx1 dgx2 dgx3; do
  grep -qE "^info probe $n: [0-9]+\.[0-9]{2} s \(ssh [0-9]+\.[0-9]{2} s" "$WORK/err" ||
    fail "-v did not print the probe time of $n"
done
grep -E '^info probe ' "$WORK/err" | sed 's/^/   /'
expect_out "fleet-probe"
expect_out "no CUDA context: fleet serve fleet-g1 runs on the node"
expect_out "no CUDA context: fleet serve fleet-g2 runs on the node"
expect_rc 0 probe dgx1 --json
python3 - "$WORK/out" <<'PY' || fail "fleet probe dgx1 while serving: $(cat "$WORK/out")"
import json, sys
g = json.load(open(sys.argv[1]))["gpu"]
assert g["source"] == "fleet-probe" and g["cuda_context"] is False, g
gpu = g["gpus"][0]
# unified memory, no context: the host's MemFree (what cuMemGetInfo
# counts), and it says so; MemAvailable is that plus the page cache
assert gpu["memory_free_source"] == "host MemFree", gpu
assert (gpu["memory_free_bytes"] + gpu["memory_reclaimable_bytes"] ==
        g["host"]["mem_available_bytes"]), gpu
PY
expect_rc 0 probe dgx1
expect_out "(from host MemFree, no CUDA context)"
[[ ! -s $ctx1 ]] || fail "fleet probe created a CUDA context under a serve: $(cat "$ctx1")"
step "fleet probe --gpu creates one anyway, with the CUDA driver's figure"
expect_rc 0 probe dgx1 --gpu --json
python3 - "$WORK/out" <<'PY' || fail "fleet probe dgx1 --gpu: $(cat "$WORK/out")"
import json, sys
g = json.load(open(sys.argv[1]))["gpu"]
assert g["cuda_context"] is True and g["gpus"][0]["memory_free_source"] == "cuMemGetInfo", g
PY
[[ $(grep -c cuDevicePrimaryCtxRetain "$ctx1") == 1 ]] || fail "fleet probe --gpu: contexts: $(cat "$ctx1")"

step "a different GPU request replaces the serve"
recipe docker.toml $'gpus = ["0"]\nipc = "host"\nulimits = {stack = 67108864}'
expect_rc 2 plan --detailed-exitcode
expect_out "replace fleet-g1"
expect_rc 0 apply --auto-approve
id1=$(ce dgx1 container inspect --format "'{{.Id}}'" fleet-g1)
grep -q "prestart id=$id1 NVIDIA_VISIBLE_DEVICES=0\$" "$hook_log" || fail "device 0 not asked for: $(cat "$hook_log")"
assert_converged
expect_rc 0 destroy --auto-approve
step "without a serve, the plan's probe creates a context"
on_node dgx1 ': >/srv/sim/cuda-contexts.log'
expect_rc 0 -v plan
[[ $(grep -c cuDevicePrimaryCtxRetain "$ctx1") == 1 ]] || fail "no context without a serve: $(cat "$ctx1")"
expect_out "a CUDA context: no fleet serve runs on the node"

step "a GPU process fleet did not start keeps fleet-probe from opening a context"
# NVML lists a process on dgx1's GPU (a notebook, another engine): no fleet
# serve runs, so the plan's script asks for a context; the probe refuses.
on_node dgx1 "sed 's/^processes =.*/processes = 4242:na/' /srv/sim/fake-gpu.conf >/srv/sim/c && cat /srv/sim/c >/srv/sim/fake-gpu.conf"
on_node dgx1 ': >/srv/sim/cuda-contexts.log'
expect_rc 0 -v plan
[[ ! -s $ctx1 ]] || fail "a context beside a non-fleet GPU process: $(cat "$ctx1")"
expect_out "no CUDA context: process 4242 runs on GPU 0 (NVML)"
expect_rc 0 probe dgx1 --gpu --json
[[ ! -s $ctx1 ]] || fail "fleet probe --gpu opened a context beside process 4242: $(cat "$ctx1")"
on_node dgx1 "sed 's/^processes =.*/processes =/' /srv/sim/fake-gpu.conf >/srv/sim/c && cat /srv/sim/c >/srv/sim/fake-gpu.conf"
no_crash
echo PASS
