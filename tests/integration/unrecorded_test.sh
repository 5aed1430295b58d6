#!/usr/bin/env bash
# What a state does not know, on every node (issue 12): after a lost state
# the plan names each serve, image and model copy fleet left on any probed
# node that nothing declares there, with what to do, whether or not that
# node has anything declared; `fleet state adopt` takes them over when the
# manifests declare them again; `fleet apply --purge` removes them (the
# serve first, then its image) and never what the nodes had before fleet.
#
# dgx1 holds the model's source; fleet pulls image bb on dgx1 and dgx2,
# copies the model to dgx2 (which marks it as fleet's) and serves b on
# dgx2. dgx2 also has an image and a model of its own, from before fleet.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/registry.sh"

PORT=$(free_port)
status_of() {  # status_of CONTAINER: its podman state on dgx2 ("" when absent)
  on_node dgx2 "podman container inspect --format '{{.State.Status}}' $1" 2>/dev/null || true
}
lose_state() { rm -f "$(state_file)" "$(state_file).backup"; }
model_json() {  # model_json NODES: model m, from dgx1, on NODES (a JSON list)
  echo "{\"repo\": \"org/tiny\", \"revision\": \"$REV\", \"store\": \"local\", \"source\": \"node:dgx1\", \"nodes\": $1}"
}
everything() {  # bb on both nodes, m copied to dgx2, b served on dgx2
  mkrepo --image "bb={\"ref\": \"$R/fleet/serve@$D\", \"source\": \"registry\", \"nodes\": [\"dgx1\", \"dgx2\"]}" \
    --model "m=$(model_json '["dgx2"]')" \
    --deployment "b={\"recipe\": \"recipes/serve.toml\", \"nodes\": [\"dgx2\"], \"image\": \"bb\", \"port\": $PORT, \"health\": {\"path\": \"/\", \"timeout\": \"20s\"}}"
}
only_dgx1() {  # dgx2 declares nothing
  mkrepo --image "bb={\"ref\": \"$R/fleet/serve@$D\", \"source\": \"registry\", \"nodes\": [\"dgx1\"]}" \
    --model "m=$(model_json '["dgx1"]')"
}

step "registry, 2 nodes, a model on dgx1; dgx2 has an image and a model from before fleet"
registry_start
D=$(image_push fleet/serve v1)
DP=$(image_push fleet/pre v1)
R=$REGISTRY
start_fleet 2 --insecure-registry "$R"
REV=$(printf 'fleet-unrecorded-test-m' | sha1sum | cut -c1-40)
PRE_REV=$(printf 'fleet-unrecorded-test-pre' | sha1sum | cut -c1-40)
HUB1=$(node_root dgx1)/hf/hub
HUB2=$(node_root dgx2)/hf/hub
python3 "$ROOT/tests/integration/mkmodel.py" --cache "$HUB1" --repo org/tiny --revision "$REV" \
  --owner "$(node_field dgx1 user)" >/dev/null
python3 "$ROOT/tests/integration/mkmodel.py" --cache "$HUB2" --repo org/pre --revision "$PRE_REV" \
  --owner "$(node_field dgx2 user)" >/dev/null
# The image as fleet leaves one it found in place: its tag, no staged mark.
on_node dgx2 "podman pull -q $R/fleet/pre@$DP >/dev/null && podman tag $R/fleet/pre@$DP $R/fleet/pre:sha256-${DP#sha256:}"
mkdir -p "$REPO/recipes"
cat >"$REPO/recipes/serve.toml" <<'TOML'
model = ""
args = ["sh", "-c", "busybox mkdir -p /www && echo hello > /www/index.html && exec busybox httpd -f -p {port} -h /www"]
memory_limit = "256m"
TOML

step "apply: bb pulled on both, m copied to dgx2 (marked as fleet's), b serves on dgx2"
everything
expect_rc 0 apply --auto-approve
assert_converged
MARK=$HUB2/models--org--tiny/.fleet-staged/$REV
[[ -f $MARK ]] || fail "the model fleet copied to dgx2 carries no staged mark ($MARK)"
[[ ! -e $HUB1/models--org--tiny/.fleet-staged ]] || fail "the source dgx1 had, which fleet did not stage, was marked"
[[ ! -e $HUB2/models--org--pre/.fleet-staged ]] || fail "dgx2's own model was marked"
[[ $(status_of fleet-b) == running ]] || fail "fleet-b does not run on dgx2: $(status_of fleet-b)"
BB2=$(on_node dgx2 "podman image inspect --format '{{.Id}}' $R/fleet/serve@$D")
RM=${REV:0:12}

step "the state is lost and dgx2 declares nothing: the plan names each thing fleet left there"
lose_state
only_dgx1
expect_rc 2 plan --detailed-exitcode  # the nodes are recorded anew
expect_out 'deployment.b@dgx2: running on dgx2 (container fleet-b) but not in this state, and the manifests do not declare it on dgx2: `fleet apply --purge` stops and removes it (or declare it there, and `fleet state adopt deployment.b@dgx2` takes it over if it matches)'
expect_out "image.bb@dgx2: image ${BB2:0:12} on dgx2 carries fleet's tag $R/fleet/serve:sha256-${D#sha256:} but is not in this state"
expect_out 'fleet staged it, and `fleet apply --purge` removes it (unless a container uses it)'
expect_out "model.m@dgx2: model org/tiny@$RM ("
expect_out ') in /srv/hf/hub on dgx2 carries fleet'"'"'s staged mark but is not in this state, and the manifests do not declare it there: fleet staged it, and `fleet apply --purge` removes it (or declare it there, and `fleet state adopt model.m@dgx2` records it)'
expect_out "carries fleet's tag $R/fleet/pre:sha256-${DP#sha256:} but is not in this state"
expect_out "fleet found it in place (it did not pull or copy it), so --purge leaves it"
expect_no_out "org/pre"
[[ ! -e $(state_file) ]] || fail "plan wrote a state file"

step "declared again: adopt --all takes each over (the model still fleet's), the plan is empty"
everything
expect_rc 2 plan --detailed-exitcode
expect_out 'not in this state: `fleet state adopt model.m@dgx2` verifies and records it without downloading'
expect_rc 0 state adopt --all
for a in node.dgx2 image.bb@dgx1 image.bb@dgx2 model.m@dgx1 model.m@dgx2 deployment.b@dgx2; do
  expect_out "Adopted $a"
done
expect_rc 0 state show model.m@dgx2
expect_out '"origin": "staged"'
expect_rc 0 state show model.m@dgx1
expect_out '"origin": "adopted"'
expect_rc 0 plan --detailed-exitcode
expect_no_out "fleet-b) but not in this state"
expect_no_out "image.bb@dgx2: image"
expect_no_out "staged mark"
expect_out "so --purge leaves it"  # dgx2's own image: still named, never taken
assert_converged

step "fleet-b killed behind podman's back (kill -9, its conmon held so podman is not told): fleet-probe's store read sees it down; then the plan, and a heal"
# libpod's database still says "running" (nothing synced it): the installed
# probe (--podman-store, no podman start) must go by the process, or a heal
# would miss a dead serve. The plan comes after conmon is let go: with conmon
# held, podman's own inspect (the serve's health probe) still says running,
# and a serve that started under health.timeout ago is "starting", not down,
# so what the plan said would depend on how long the steps above took.
read -r cpid conmon < <(on_node dgx2 "podman container inspect --format '{{.State.Pid}} {{.State.ConmonPid}}' fleet-b")
[[ $cpid -gt 1 && $conmon -gt 1 ]] || fail "fleet-b: no pid ($cpid) or conmon pid ($conmon)"
SERVES='/containers/json?filters=%7B%22label%22%3A%5B%22fleet.deployment%22%5D%7D'
on_node dgx2 "\"\$HOME\"/.fleet/bin/fleet-probe --podman-store '$SERVES'" >"$WORK/store" ||
  fail "the probe did not read dgx2's store: $(cat "$WORK/store")"
grep -q '"Names":\["fleet-b"\]' "$WORK/store" || fail "fleet-b not running by the probe: $(cat "$WORK/store")"
kill -STOP "$conmon"
kill -9 "$cpid"
on_node dgx2 "\"\$HOME\"/.fleet/bin/fleet-probe --podman-store '$SERVES'" >"$WORK/store" || {
  kill -CONT "$conmon"
  fail "the probe did not read dgx2's store after the kill: $(cat "$WORK/store")"
}
kill -CONT "$conmon"
grep -qx '\[\]' <(head -n 1 "$WORK/store") || fail "the probe still lists fleet-b: $(cat "$WORK/store")"
# conmon, let go, reaps it and writes its exit file: down by every path.
for ((i = 0; i < 100; i++)); do
  [[ $(on_node dgx2 "kill -0 $conmon 2>/dev/null || echo gone") == gone ]] && break
  nap 0.1
done
[[ $i -lt 100 ]] || fail "fleet-b's conmon ($conmon) still there 10 s after it was let go"
expect_rc 2 plan --detailed-exitcode
expect_out "deployment.b@dgx2"
expect_rc 0 apply --auto-approve
[[ $(status_of fleet-b) == running ]] || fail "fleet-b not healed: $(status_of fleet-b)"
assert_converged

step "the state is lost again: apply --purge removes the serve, then its image, and the model"
lose_state
only_dgx1
expect_rc 2 plan --purge --detailed-exitcode
expect_out "deployment.b@dgx2 will be destroyed: stop and remove fleet-b"
expect_out "model.m@dgx2 will be destroyed: remove org/tiny@$RM"
expect_rc 0 apply --purge --auto-approve
[[ -z $(status_of fleet-b) ]] || fail "fleet-b is still on dgx2: $(status_of fleet-b)"
! on_node dgx2 "podman image exists $R/fleet/serve@$D" || fail "bb is still on dgx2"
[[ ! -e $HUB2/models--org--tiny ]] || fail "the model fleet staged on dgx2 is still there"
on_node dgx2 "podman image exists $R/fleet/pre@$DP" || fail "--purge removed dgx2's own image"
[[ -d $HUB2/models--org--pre/snapshots/$PRE_REV ]] || fail "--purge removed dgx2's own model"
on_node dgx1 "podman image exists $R/fleet/serve@$D" || fail "--purge removed the declared bb on dgx1"
[[ -d $HUB1/models--org--tiny/snapshots/$REV ]] || fail "--purge removed the declared model on dgx1"
assert_converged
expect_rc 0 plan --purge --detailed-exitcode  # nothing of fleet's is left to name
expect_no_out "staged mark"
echo PASS
