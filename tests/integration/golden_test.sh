#!/usr/bin/env bash
# Golden files: what fleet prints (plan text, plan JSON, a saved plan's
# `show --json`) and stores (the state file) for fixed scenarios on a
# simulated fleet covering every resource type (node with power, probe,
# display_ram, image pulled by digest and copied node to node, model staged
# from a peer, deployment), compared byte for byte, after normalisation
# (tests/golden/normalize.py), with tests/golden/<scenario>/<file>.
#
#   bash tests/integration/golden_test.sh                        # compare; the diff on failure
#   FLEET_GOLDEN_UPDATE=1 bash tests/integration/golden_test.sh  # rewrite tests/golden/
#
# Scenarios: 1-fresh (plan, apply a saved plan, state, the converged plan),
# 2-update (a recipe env change replaces the serve, display RAM back to its
# default), 3-orphan (an image the manifests drop), 4-errors (a hostname
# mismatch, a port held by another process), 5-destroy (plan --destroy,
# destroy, state, the plan after). The images are built reproducibly
# (pushimage.py), so their digests are kept as they are.
#
# The whole test runs in a network namespace of its own (unshare --net, its
# own loopback), so it can use FIXED ports (ssh, registry, power controller,
# the serve) while other tests and other copies of it run: ports appear in
# plans and in hashes fleet records (a deployment's spec), so random ones
# could not be compared.
if [[ -z ${FLEET_GOLDEN_NETNS:-} ]]; then
  exec unshare --net -- env FLEET_GOLDEN_NETNS=1 bash "$0" "$@"
fi
ip link set lo up
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/registry.sh"

GOLDEN=$ROOT/tests/golden
GOT=$WORK/golden
NORMALIZE=$ROOT/tests/golden/normalize.py
SCENARIO=""

# scenario NAME: the files captured next go to NAME/.
scenario() {
  SCENARIO=$1
  mkdir -p "$GOT/$SCENARIO"
  step "$SCENARIO"
}
# keep FILE SRC: SRC, normalised, as the scenario's FILE.
keep() {
  python3 "$NORMALIZE" --sim "$SIMDIR" --work "$WORK" --root "$ROOT" <"$2" >"$GOT/$SCENARIO/$1" ||
    fail "normalize $2"
}
# cap FILE RC fleet-args...: runs fleet, expects RC, keeps stdout+stderr.
cap() {
  local file=$1 rc=$2
  shift 2
  expect_rc "$rc" "$@"
  cat "$WORK/out" "$WORK/err" >"$WORK/cap"
  keep "$file" "$WORK/cap"
}
# plans PREFIX [fleet-plan-args...]: the plan as text and as JSON.
plans() {
  local prefix=$1
  shift
  cap "$prefix.txt" 2 plan --detailed-exitcode "$@"
  cap "$prefix.json" 0 plan --json "$@"
}
keep_state() { keep "$1" "$(state_file)"; }

REV=$(printf 'fleet-golden-test' | sha1sum | cut -c1-40)
recipe() {  # recipe GREETING
  mkdir -p "$REPO/recipes"
  cat >"$REPO/recipes/serve.toml" <<TOML
model = ""
args = ["sh", "-c", "busybox mkdir -p /www/v1 && busybox ls /model > /www/v1/models && exec busybox httpd -f -p {port} -h /www"]
memory_limit = "256m"

[env]
GREETING = "$1"
TOML
}
# repo [DGX2-DISPLAY-RAM [EXTRA-MKREPO-ARGS...]]: the manifests.
repo() {
  local unlock=${1-dgx2}
  shift || true
  mkrepo --power --unlock "$unlock" \
    --image "bb={\"ref\": \"$R/fleet/bb@$D1\", \"source\": \"registry\", \"nodes\": [\"dgx2\"]}" \
    --model "m={\"repo\": \"org/tiny\", \"revision\": \"$REV\", \"store\": \"local\", \"source\": \"node:dgx1\", \"nodes\": [\"dgx2\"]}" \
    --deployment "serve={\"recipe\": \"recipes/serve.toml\", \"nodes\": [\"dgx2\"], \"image\": \"bb\", \"model\": \"m\", \"port\": $PORT, \"health\": {\"path\": \"/v1/models\", \"timeout\": \"20s\"}}" \
    "$@"
}
BBC=()  # the copied image's mkrepo flag, when declared

step "registry, reproducible images, 3 nodes (dgx2 a simulated GB10), a real model on dgx1"
registry_start 5000
R=$REGISTRY
PORT=30000  # the serve's; PORT+1 is held by another process in 4-errors
URL=http://127.0.0.1:$PORT
D1=$(python3 "$ROOT/tests/integration/pushimage.py" --registry "$R" --repo fleet/bb --tag v1) || fail "push bb"
D2=$(python3 "$ROOT/tests/integration/pushimage.py" --registry "$R" --repo fleet/bbc --tag v1) || fail "push bbc"
start_fleet 3 --base-port 2201 --power --ha-port 8123 --insecure-registry "$R" --gpu dgx2=gb10
FLEET_SIM_HA_TOKEN=$(cat "$SIMDIR/ha_token")
export FLEET_SIM_HA_TOKEN
python3 "$ROOT/tests/integration/mkmodel.py" --cache "$(node_root dgx1)/hf/hub" --repo org/tiny \
  --revision "$REV" --owner "$(node_field dgx1 user)" >/dev/null
on_node dgx1 "podman pull -q $R/fleet/bbc@$D2" >/dev/null  # the copy's source
BBC=(--image "bbc={\"ref\": \"$R/fleet/bbc@$D2\", \"source\": \"node:dgx1\", \"nodes\": [\"dgx1\", \"dgx3\"]}")
recipe "hello v1"
repo dgx2 "${BBC[@]}"

scenario 1-fresh
plans plan
cap saved-plan.txt 0 plan -out "$WORK/saved.plan"
cap show-saved-plan.json 0 show --json "$WORK/saved.plan"
expect_rc 0 apply "$WORK/saved.plan"
expect_out "Apply complete"
[[ $(curl -s --max-time 5 "$URL/v1/models") == *config.json* ]] || fail "the serve does not answer"
keep_state state.json
cap plan-after.txt 0 plan --detailed-exitcode
cap plan-after.json 0 plan --json
assert_converged

scenario 2-update
recipe "hello v2"
repo "" "${BBC[@]}"
plans plan
expect_rc 0 apply --auto-approve
keep_state state.json
assert_converged

scenario 3-orphan
repo ""  # bbc no longer declared: forgotten, not removed
plans plan
expect_rc 0 apply --auto-approve
keep_state state.json
assert_converged

scenario 4-errors
repo "" --hostname dgx3=not-dgx3
cap hostname-mismatch.txt 1 plan
hold_port $((PORT + 1))
repo ""
# Two serves on dgx2: shared on both (one serve per node otherwise).
sed -i 's/^  serve: {/  serve: {"shared": true, /' "$REPO/fleet.yaml"
cat >>"$REPO/fleet.yaml" <<YAML
  other: {"recipe": "recipes/serve.toml", "nodes": ["dgx2"], "image": "bb", "model": "m", "port": $((PORT + 1)), "shared": true}
YAML
cap port-held.txt 1 plan
release_port
repo ""

scenario 5-destroy
plans plan --destroy
cap saved-plan.txt 0 plan --destroy -out "$WORK/destroy.plan"
cap show-saved-plan.json 0 show --json "$WORK/destroy.plan"
expect_rc 0 destroy --auto-approve
expect_out "Destroy complete"
keep_state state.json
cap plan-after.txt 2 plan --detailed-exitcode
no_crash

if [[ -n ${FLEET_GOLDEN_UPDATE:-} ]]; then
  rm -rf "$GOLDEN"/[0-9]*-*
  cp -r "$GOT"/. "$GOLDEN"/
  echo "golden files rewritten in $GOLDEN"
  exit 0
fi
if ! diff -ru "$GOLDEN" "$GOT" -x normalize.py -x README.md >"$WORK/golden.diff"; then
  sed "s|$GOT|(this run)|g" "$WORK/golden.diff" >&2
  rm -f "$WORK/out" "$WORK/err"  # the diff is the message, not the last command's output
  fail "output differs from the golden files (the diff above; FLEET_GOLDEN_UPDATE=1 rewrites them)"
fi
echo PASS
