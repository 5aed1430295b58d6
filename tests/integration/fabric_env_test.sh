#!/usr/bin/env bash
# Fabric facts for a serve on two nodes, on a two-network simulated fleet
# (fleet-sim --net lan+fabric: a fake /sys/class/infiniband per node, one
# ACTIVE RoCE port on the fabric netdev with RoCE v2 GID index 3):
# - with fabric_env: true, each rank's running container (read through the
#   node's engine) has NCCL_SOCKET_IFNAME, GLOO_SOCKET_IFNAME and
#   UCX_NET_DEVICES naming the fabric netdev, NCCL_IB_HCA the active HCA,
#   NCCL_IB_GID_INDEX the GID, MASTER_ADDR the head's fabric address and
#   MASTER_PORT torch's default 29500; the
#   worker's {head_fabric_addr} argument is the head's; the recipe's own env
#   wins; the head serves; converged;
# - a node declared on another fabric subnet is a plan error naming both
#   nodes, and nothing is changed.
# Registered once per engine (tests/meson.build): rootless podman nodes, and
# a dockerd per node (FLEET_TEST_ENGINE=docker), each in its node's netns;
# the plan error on podman only.
source "$(dirname "$0")/lib.sh"

for tool in ip tc nsenter "$CE" busybox; do
  command -v "$tool" >/dev/null || { echo "SKIP: $tool not installed"; exit 77; }
done
[[ $ENGINE != mixed ]] || { echo "SKIP: one engine per run (podman or docker)"; exit 77; }

env_of() {  # env_of NODE: the env of fleet-pair as the node's engine has it, one per line
  ce "$1" "container inspect --format '{{range .Config.Env}}{{println .}}{{end}}' fleet-pair"
}
env_is() {  # env_is NODE NAME VALUE
  local got
  got=$(env_of "$1" | sed -n "s/^$2=//p")
  [[ $got == "$3" ]] || fail "$1: fleet-pair has $2='$got', expected '$3'"
}

step "start 2 nodes on two networks"
start_fleet 2 --net lan+fabric

step "a busybox image on dgx1 (imported: no registry is reachable from the nodes)"
D=sha256:$(printf 'fleet fabric env test' | sha256sum | cut -d' ' -f1)
rootfs=$WORK/rootfs
mkdir -p "$rootfs/bin"
cp "$(command -v busybox)" "$rootfs/bin/busybox"
ln -s busybox "$rootfs/bin/sh"
quiet=; [[ $CE == podman ]] && quiet=-q  # docker import has no -q
tar -C "$rootfs" -c . | ce dgx1 "import $quiet - localhost/fleet/pair:sha256-${D#sha256:} >/dev/null"
IMG='bb={"ref": "localhost/fleet/pair@'$D'", "source": "node:dgx1"}'

# The head serves {port} with busybox httpd; the worker sleeps and says
# where it joins. Both stop on SIGTERM.
PORT=30123
mkdir -p "$REPO/recipes"
cat >"$REPO/recipes/pair.toml" <<'TOML'
model = ""
args = ["sh", "-c", "if [ {rank} = 0 ]; then busybox mkdir -p /www/v1 && echo head > /www/v1/models; busybox httpd -f -p {port} -h /www & pid=$!; else echo 'worker {rank} joins {head_fabric_addr} over {fabric_if}'; busybox sleep 100000 & pid=$!; fi; trap 'kill $pid; exit 0' TERM; wait $pid", "{head_fabric_addr}"]

[env]
NCCL_DEBUG = "INFO"
UCX_NET_DEVICES = "all"
TOML
DEP='pair={"recipe": "recipes/pair.toml", "nodes": ["dgx1", "dgx2"], "image": "bb", "port": '$PORT', "health": {"path": "/v1/models", "timeout": "30s"}, "fabric_env": true}'

step "a group with fabric_env: the plan shows the fabric env"
mkrepo --image "$IMG" --deployment "$DEP"
expect_rc 0 validate
expect_rc 2 plan --detailed-exitcode
expect_out "deployment.pair@dgx2"
expect_out "MASTER_ADDR"
expect_out '"MASTER_PORT":"29500"'
expect_out "10.77.0.11"
expect_out "enp1s0f1np1"
expect_rc 0 apply --auto-approve

step "each rank's container env names the fabric and the head's fabric address"
for n in dgx1 dgx2; do
  env_is $n NCCL_SOCKET_IFNAME enp1s0f1np1
  env_is $n GLOO_SOCKET_IFNAME enp1s0f1np1
  env_is $n NCCL_IB_HCA rocep1s0f1
  env_is $n NCCL_IB_GID_INDEX 3
  env_is $n MASTER_ADDR 10.77.0.11
  env_is $n MASTER_PORT 29500
  env_is $n UCX_NET_DEVICES all  # the recipe's own env wins
  env_is $n NCCL_DEBUG INFO
done
[[ $(ce dgx2 "container inspect --format '{{.State.Status}}' fleet-pair") == running ]] ||
  fail "the worker does not run"
expect_rc 0 logs deployment.pair@dgx2
expect_out "worker 1 joins 10.77.0.11 over enp1s0f1np1"
on_node dgx1 "busybox wget -q -O - http://127.0.0.1:$PORT/v1/models" | grep -qx head ||
  fail "the head does not serve"
assert_converged

# The plan's fabric check, without the engine: on podman only
# (engine_free_phase in lib.sh).
if engine_free_phase; then
step "a node on another fabric subnet is a plan error naming the nodes"
mkrepo --image "$IMG" --deployment "$DEP" --fabric 'dgx2={address: 10.99.0.12}'
expect_rc 1 plan
expect_out "but its nodes share no fabric subnet: dgx1 10.77.0.11 (10.77.0.0/24) (the head), dgx2 10.99.0.12"
id_before=$(ce dgx2 "container inspect --format '{{.Id}}' fleet-pair")
expect_rc 1 apply --auto-approve
[[ $(ce dgx2 "container inspect --format '{{.Id}}' fleet-pair") == "$id_before" ]] ||
  fail "a plan with a fabric error changed the worker"
mkrepo --image "$IMG" --deployment "$DEP"
assert_converged
fi

echo PASS
