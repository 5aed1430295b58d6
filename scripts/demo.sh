#!/usr/bin/env bash
# The demo: install what is needed, build, start a simulated fleet of five
# real sshd nodes on loopback, a local registry holding the demo's serving
# image and two small real models on dgx4, then `fleet plan` and `fleet
# apply` the examples/spark-lab manifests against it (power, display RAM,
# image pulls by digest, model staging, a serve of the stand-in OpenAI
# engine on dgx5 answering on 127.0.0.1:30000 and one across dgx1+dgx2 on
# :30001, each passing its smoke checks), show that a second plan is empty,
# ask one serve a chat question, and end with `fleet check`. Run as root on
# Debian 12. `scripts/demo.sh stop` stops the fleet and the registry.
# Installs only what it runs (scripts/install-deps.sh --demo).
set -euo pipefail
cd "$(dirname "$0")/.."
repo=examples/spark-lab
sim=$repo/.sim
registry_dir=$repo/.registry
registry=127.0.0.1:25000
registry_stop() {
  [[ -f $registry_dir/pid ]] || return 0
  kill "$(cat "$registry_dir/pid")" 2>/dev/null || true
  rm -f "$registry_dir/pid"
}
if [[ ${1:-} == stop ]]; then
  tests/sim/fleet-sim stop "$sim" --purge
  registry_stop
  exit 0
fi
# Installs only what the demo runs (the build, sshd, podman, the registry,
# HAProxy): one line says so; apt's output goes to a log, named on failure.
bash scripts/install-deps.sh --demo
build_log=${TMPDIR:-/tmp}/fleet-demo-build.log
echo "== building fleet (scripts/build.sh; its output: $build_log)"
bash scripts/build.sh >"$build_log" 2>&1 || {
  tail -n 30 "$build_log" >&2
  echo "demo.sh: the build failed (the whole output: $build_log)" >&2
  exit 1
}
fleet=build/src/engine/fleet
export FLEET_SIM_FAKE_GPU_DIR=$PWD/build/tests/sim/fake_gpu

tests/sim/fleet-sim stop "$sim" >/dev/null 2>&1 || true
registry_stop
rm -rf "$repo/.fleet" "$registry_dir"
echo "== starting a registry on $registry with the demo's serving image"
mkdir -p "$registry_dir/data"
cat >"$registry_dir/config.yml" <<YAML
version: 0.1
log: {level: warn}
storage: {filesystem: {rootdirectory: $PWD/$registry_dir/data}}
http: {addr: "$registry"}
YAML
/usr/bin/docker-registry serve "$registry_dir/config.yml" >>"$registry_dir/log" 2>&1 &
echo $! >"$registry_dir/pid"
for _ in $(seq 50); do
  python3 -c 'import sys, urllib.request; urllib.request.urlopen("http://%s/v2/" % sys.argv[1], timeout=1)' \
    "$registry" 2>/dev/null && break
  sleep 0.1
done
digest=$(python3 scripts/demo_image.py "$registry" spark-lab/demo-serve v1 build/tests/sim/fake_engine/fake-engine)
if ! grep -q "demo-serve@$digest" "$repo/fleet.yaml"; then
  # Another busybox, compiler or architecture gives another digest: pin this one.
  sed -i "s|demo-serve@sha256:[0-9a-f]*|demo-serve@$digest|" "$repo/fleet.yaml"
  echo "   (this machine's busybox and fake-engine build give image $digest: pinned it in $repo/fleet.yaml)"
fi
gw_digest=$(python3 scripts/demo_image.py --haproxy "$registry" spark-lab/gateway v1)
if ! grep -q "gateway@$gw_digest" "$repo/fleet.yaml"; then
  # Another haproxy build or its libraries give another digest: pin this one.
  sed -i "s|spark-lab/gateway@sha256:[0-9a-f]*|spark-lab/gateway@$gw_digest|" "$repo/fleet.yaml"
  echo "   (this machine's haproxy gives gateway image $gw_digest: pinned it in $repo/fleet.yaml)"
fi

echo "== starting 5 simulated nodes (sshd on 127.0.0.1:22101-22105) and a power switch server"
tests/sim/fleet-sim start "$sim" --nodes 5 --prefix fleetdemo- --base-port 22101 \
  --power --ha-port 28123 --insecure-registry "$registry" --gpu gb10
# --gpu gb10: each node gets a stand-in CUDA driver (tests/sim/fake_gpu) that
# answers like a DGX Spark's: fleet-probe reads its memory, and the display
# RAM unlock frees a measurable 2 GiB. The rest is real.
echo "== a small real model (safetensors shards, hub layout) on dgx4, the source of the staging"
python3 tests/integration/mkmodel.py --cache "$sim/nodes/dgx4/root/hf/hub" \
  --repo fleet-demo/Qwen3.8-tiny --revision 93d7ea55e731d3fe847a927d8a6a2853977d85d2 \
  --owner fleetdemo-dgx4 >/dev/null
python3 tests/integration/mkmodel.py --cache "$sim/nodes/dgx4/root/hf/hub" \
  --repo fleet-demo/DeepSeek-V4.1-Flash-EXL3-tiny --revision b562d6701f50db7c85c7031a9534ec4301278f08 \
  --seed 41 --owner fleetdemo-dgx4 >/dev/null
FLEET_DEMO_HA_TOKEN=$(cat "$sim/ha_token")
export FLEET_DEMO_HA_TOKEN
# The hot spare starts powered on, so the plan has something to switch off.

echo; echo "== fleet validate"; $fleet -C "$repo" validate
echo; echo "== fleet plan"; $fleet -C "$repo" plan
echo; echo "== fleet apply --auto-approve"; $fleet -C "$repo" apply --auto-approve
echo; echo "== fleet plan (again: nothing to do)"; $fleet -C "$repo" plan --detailed-exitcode
echo; echo "== fleet status"; $fleet -C "$repo" status
echo; echo "== a client asks qwen3.8 on dgx5 (the stand-in engine answers as vLLM would)"
echo "   curl http://127.0.0.1:30000/v1/chat/completions -d '{\"model\": \"qwen3.8\", \"messages\": [...]}'"
curl -s http://127.0.0.1:30000/v1/chat/completions -H 'Content-Type: application/json' \
  -d '{"model": "qwen3.8", "messages": [{"role": "user", "content": "What is the capital of France?"}]}'
echo
echo; echo "== the same through the lab's gateway on dgx4 (HAProxy, routed by the request's model)"
echo "   curl http://127.0.0.1:28000/v1/chat/completions -d '{\"model\": \"qwen3.8\", ...}'"
curl -s -D - http://127.0.0.1:28000/v1/chat/completions -H 'Content-Type: application/json' \
  -d '{"model": "qwen3.8", "messages": [{"role": "user", "content": "What is 127*89?"}]}' |
  tr -d '\r' | grep -E '^x-fleet-served-by|^\{'
echo
echo; echo "== fleet check (each serve: identity, then its smoke checks; then each model through the gateway)"; $fleet -C "$repo" check
echo; echo "== fleet endpoints (what to give a client, from the state)"; $fleet -C "$repo" endpoints
echo
echo "The simulated fleet is still running: try"
echo "  export FLEET_DEMO_HA_TOKEN=\$(cat $sim/ha_token)"
echo "  $fleet -C $repo watch --heal --every 30s --log watch.jsonl   # checks every 30 s, heals what dies (Ctrl-C ends it)"
echo "  $fleet report watch.jsonl -o report.html   # one HTML page of the watch log: checks, TTFT, t/s"
echo "  $fleet -C $repo destroy --auto-approve   # shift end: restore display RAM, power off"
echo "  $fleet -C $repo plan                     # what an apply would bring back"
echo "  scripts/demo.sh stop                      # stop the simulated nodes and the registry"
