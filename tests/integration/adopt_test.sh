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
expect_rc 2 plan --detailed-exitcode  # the node and the image are still to record
expect_no_out "not in this state"
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
expect_out "deployment.beta@dgx1: port $PORT on dgx1 is held by deployment.b@dgx1, ${NOTE#deployment.b@dgx1: } if it matches the manifests"
expect_out '`fleet apply --purge` removes it'
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
echo PASS
