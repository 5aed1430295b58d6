#!/usr/bin/env bash
# What a state does not know (issue 12): a serve that carries fleet's labels
# on a node but has no record in this state (a lost state file, another
# operator's state, a lab adopting fleet while its serves run).
# - the plan names it, with what to do;
# - `fleet state adopt` refuses one whose spec differs from the manifests,
#   with the reason, and writes nothing;
# - it takes over one that matches (serial 1), after which the plan is empty;
# - an unknown serve holding the port a new deployment wants is a plan error
#   that says what it is and what to do, and `apply --purge` removes it first.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/registry.sh"

PORT=$(free_port)
URL=http://127.0.0.1:$PORT
code() { curl -s -o /dev/null -w '%{http_code}' --max-time 5 "$URL/" || true; }
status_of() {  # status_of CONTAINER: its podman state on dgx1 ("" when absent)
  on_node dgx1 "podman container inspect --format '{{.State.Status}}' $1" 2>/dev/null || true
}
recipe() {  # recipe GREETING: busybox httpd on {port}
  mkdir -p "$REPO/recipes"
  cat >"$REPO/recipes/serve.toml" <<TOML
model = ""
args = ["sh", "-c", "busybox mkdir -p /www && echo \$GREETING > /www/index.html && exec busybox httpd -f -p {port} -h /www"]
memory_limit = "256m"

[env]
GREETING = "$1"
TOML
}
repo() {  # repo NAME: one deployment NAME on dgx1, on $PORT
  mkrepo --image "bb={\"ref\": \"$R/fleet/serve@$D\", \"source\": \"registry\"}" \
    --deployment "$1={\"recipe\": \"recipes/serve.toml\", \"nodes\": [\"dgx1\"], \"image\": \"bb\", \"port\": $PORT, \"health\": {\"path\": \"/\", \"timeout\": \"20s\"}}"
}
lose_state() { rm -f "$(state_file)" "$(state_file).backup"; }
NOTE='deployment.b@dgx1: running on dgx1 (container fleet-b) but not in this state: `fleet state adopt deployment.b@dgx1` takes it over'

step "registry, image, 1 node; apply serves fleet-b"
registry_start
D=$(image_push fleet/serve v1)
R=$REGISTRY
start_fleet 1 --insecure-registry "$R"
repo b
recipe hello
expect_rc 0 apply --auto-approve
[[ $(code) == 200 ]] || fail "fleet-b does not answer: $(code)"
assert_converged
expect_no_out "not in this state"

step "the state file is lost: the plan names the serve it does not know, with the advice"
lose_state
expect_rc 2 plan --detailed-exitcode  # the node is recorded anew (adopt node)
expect_out "$NOTE (it matches the manifests)"
[[ ! -e $(state_file) ]] || fail "plan wrote a state file"

step "adopt refuses a serve whose spec differs from the manifests, and writes nothing"
recipe changed
expect_rc 1 state adopt deployment.b@dgx1
expect_out "cannot adopt deployment.b@dgx1: fleet-b on dgx1 does not match the manifests (the plan would replace fleet-b)"
expect_out "the state is unchanged"
[[ ! -e $(state_file) ]] || fail "a refused adopt wrote a state file"
recipe hello
expect_rc 1 state adopt deployment.nope@dgx1
expect_out "the manifests do not declare it"

step "adopt takes over the matching serve; the plan is then empty"
expect_rc 0 state adopt deployment.b@dgx1
expect_out "Adopted deployment.b@dgx1"
[[ $(state_serial) == 1 ]] || fail "adopt left serial $(state_serial), expected 1"
expect_rc 0 state show deployment.b@dgx1
expect_out '"container_id"'
expect_rc 1 state adopt deployment.b@dgx1
expect_out "it is in the state already"
[[ $(state_serial) == 1 ]] || fail "a refused adopt bumped the serial to $(state_serial)"
expect_rc 2 plan --detailed-exitcode  # the node is still to record, the image to adopt
expect_no_out "(container fleet-b) but not in this state"
expect_no_out "fleet-b"
ID=$(on_node dgx1 "podman container inspect --format '{{.Id}}' fleet-b")
expect_rc 0 apply --auto-approve
[[ $(on_node dgx1 "podman container inspect --format '{{.Id}}' fleet-b") == "$ID" ]] ||
  fail "the apply after adopt replaced fleet-b"
[[ $(status_of fleet-b) == running ]] || fail "fleet-b does not run: $(status_of fleet-b)"
assert_converged

step "an unknown fleet-b on the port a new deployment wants: the plan says what it is and what to do"
lose_state
repo beta
expect_rc 1 plan
expect_out 'deployment.beta@dgx1: port '$PORT' on dgx1 is held by deployment.b@dgx1, running on dgx1 (container fleet-b) but not in this state, and the manifests do not declare it on dgx1: `fleet apply --purge` stops and removes it (or declare it there, and `fleet state adopt deployment.b@dgx1` takes it over if it matches)'
expect_no_out "which this plan does not change"
expect_rc 1 state adopt deployment.b@dgx1
expect_out "the manifests do not declare it"
[[ ! -e $(state_file) ]] || fail "a refused adopt wrote a state file"

step "apply --purge removes the unknown serve first, then starts beta"
expect_rc 2 plan --purge --detailed-exitcode
expect_out "stop and remove fleet-b"
expect_rc 0 apply --purge --auto-approve
[[ -z $(status_of fleet-b) ]] || fail "fleet-b is still there: $(status_of fleet-b)"
[[ $(status_of fleet-beta) == running ]] || fail "fleet-beta does not run: $(status_of fleet-beta)"
[[ $(code) == 200 ]] || fail "fleet-beta does not answer: $(code)"
assert_converged

# Images and models too: after a lost state the plan names each with what to
# do, `fleet state adopt --all` records them after checking them (digest,
# files and headers) without pulling or copying anything, and the plan is
# then empty. An image fleet tagged that nothing declares is named, and
# removed with --purge.
REV=$(printf 'fleet-adopt-test-m' | sha1sum | cut -c1-40)
HUB=$(node_root dgx1)/hf/hub
python3 "$ROOT/tests/integration/mkmodel.py" --cache "$HUB" --repo org/tiny --revision "$REV" \
  --owner "$(node_field dgx1 user)" >/dev/null
repo_all() {  # image bb, deployment b and model m on dgx1
  mkrepo --image "bb={\"ref\": \"$R/fleet/serve@$D\", \"source\": \"registry\"}" \
    --model "m={\"repo\": \"org/tiny\", \"revision\": \"$REV\", \"store\": \"local\", \"source\": \"node:dgx1\", \"nodes\": [\"dgx1\"]}" \
    --deployment "b={\"recipe\": \"recipes/serve.toml\", \"nodes\": [\"dgx1\"], \"image\": \"bb\", \"port\": $PORT, \"health\": {\"path\": \"/\", \"timeout\": \"20s\"}}"
}

step "images and models: apply records the model and serves b (bb was pulled by the first apply)"
on_node dgx1 "podman image exists $R/fleet/serve:staged-sha256-${D#sha256:}" ||
  fail "the image fleet pulled does not carry fleet's staged mark"
repo_all
expect_rc 0 apply --auto-approve
assert_converged
IMG_ID=$(on_node dgx1 "podman image inspect --format '{{.Id}}' $R/fleet/serve@$D")

step "an image fleet tagged that nothing declares: named, kept without --purge"
D2=$(image_push fleet/old v2)
# As fleet leaves an image it pulled: its tag and its staged mark.
on_node dgx1 "podman pull -q $R/fleet/old@$D2 >/dev/null && podman tag $R/fleet/old@$D2 $R/fleet/old:sha256-${D2#sha256:} $R/fleet/old:staged-sha256-${D2#sha256:}"
OLD_ADDR="image.old-${D2:7:12}@dgx1"
expect_rc 0 plan --detailed-exitcode
expect_out "$OLD_ADDR: image"
expect_out "carries fleet's tag $R/fleet/old:sha256-${D2#sha256:} but is not in this state"
expect_out 'fleet staged it, and `fleet apply --purge` removes it'

step "the state file is lost: the plan names the image, the model and the serve"
lose_state
expect_rc 2 plan --detailed-exitcode
expect_out "image.bb@dgx1: on dgx1 as image ${IMG_ID:0:12}"
expect_out 'but not in this state: `fleet state adopt image.bb@dgx1` records it (by registry digest, nothing pulled)'
expect_out 'not in this state: `fleet state adopt model.m@dgx1` verifies and records it without downloading'
expect_out "$NOTE (it matches the manifests)"
expect_out "$OLD_ADDR"

step "adopt refuses a model whose files are broken, and writes nothing"
BLOB=$(readlink -f "$HUB/models--org--tiny/snapshots/$REV/model-00002-of-00003.safetensors")
cp "$BLOB" "$WORK/blob.keep"
printf 'XXXXXXXX' | dd of="$BLOB" bs=1 seek=0 conv=notrunc 2>/dev/null
expect_rc 1 state adopt model.m@dgx1
expect_out "cannot adopt model.m@dgx1"
[[ ! -e $(state_file) ]] || fail "a refused adopt wrote a state file"
cp "$WORK/blob.keep" "$BLOB"

step "adopt --all records every one without pulling or copying; the plan is empty"
expect_rc 0 state adopt --all
for a in node.dgx1 image.bb@dgx1 model.m@dgx1 deployment.b@dgx1; do
  expect_out "Adopted $a"
done
[[ $(state_serial) == 1 ]] || fail "adopt --all left serial $(state_serial), expected 1 (one write)"
expect_rc 0 state show image.bb@dgx1
expect_out '"via": "adopted"'
expect_rc 0 state show model.m@dgx1
expect_out '"verified": "headers"'
expect_rc 0 plan --detailed-exitcode
expect_no_out 'fleet state adopt'
expect_rc 0 apply --auto-approve
expect_no_out "pull "
[[ $(state_serial) == 1 ]] || fail "the apply after adopt --all wrote the state (serial $(state_serial))"
assert_converged
expect_rc 0 state adopt --all
expect_out "Nothing to adopt"

step "apply --purge removes the undeclared image fleet tagged, and nothing else"
expect_rc 2 plan --purge --detailed-exitcode
expect_out "$OLD_ADDR"
expect_out "remove image"
expect_rc 0 apply --purge --auto-approve
! on_node dgx1 "podman image exists $R/fleet/old@$D2" || fail "the undeclared image is still there"
on_node dgx1 "podman image exists $R/fleet/serve@$D" || fail "--purge removed the declared image"
[[ $(status_of fleet-b) == running ]] || fail "fleet-b does not run: $(status_of fleet-b)"
assert_converged
echo PASS
