#!/usr/bin/env bash
# Plan and apply against real sshd nodes, then prove idempotence: plan shows
# no change, a second apply does nothing and leaves the serial alone.
source "$(dirname "$0")/lib.sh"

step "start 3 simulated nodes"
start_fleet 3
mkrepo --unlock dgx2

step "validate needs no network"
expect_rc 0 validate

step "plan shows the changes and touches nothing"
expect_rc 2 plan --detailed-exitcode
expect_out "node.dgx1"
expect_out "unlock display RAM"
[[ ! -e $(state_file) ]] || fail "plan wrote a state file"
[[ $(param dgx2 modeset) == N ]] || fail "plan changed the node"

step "plan --json follows the contract"
expect_rc 0 plan --json
python3 - "$WORK/out" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
assert p["format_version"] == "1", p
by = {c["address"]: c for c in p["changes"]}
assert by["node.dgx1"]["action"] == "create", by["node.dgx1"]
assert by["display_ram.dgx2"]["action"] == "update", by["display_ram.dgx2"]
assert by["display_ram.dgx2"]["depends_on"] == ["node.dgx2", "probe.dgx2"]
assert by["probe.dgx1"]["action"] == "create", by["probe.dgx1"]
assert by["display_ram.dgx2"]["reasons"], "a change says why"
assert by["display_ram.dgx1"]["action"] == "noop"
assert p["summary"]["create"] == 6 and p["summary"]["update"] == 1, p["summary"]
assert p["errors"] == []
PY

step "apply"
expect_rc 0 apply --auto-approve
expect_out "Apply complete"
[[ $(param dgx2 modeset) == Y && $(param dgx2 fbdev) == N ]] || fail "dgx2 not unlocked"
[[ $(param dgx1 modeset) == N && $(param dgx1 fbdev) == Y ]] || fail "dgx1 touched"
[[ $(stat -c %a "$(state_file)") == 600 ]] || fail "state file mode $(stat -c %a "$(state_file)")"

step "converged: plan shows no change, second apply does nothing"
assert_converged

step "state commands"
expect_rc 0 state list
expect_out "display_ram.dgx2"
expect_rc 0 state show display_ram.dgx2
expect_out '"original"'
expect_rc 0 show --json
expect_rc 0 probe dgx1
expect_out "hostname:   dgx1"
expect_out "no GPU"  # the installed fleet-probe answers: this machine has none
expect_rc 0 probe dgx1 --json
python3 -c 'import json,sys; f=json.load(open(sys.argv[1])); assert f["gpu"]["source"]=="fleet-probe", f' "$WORK/out"

step "apply with no terminal and no --auto-approve refuses instead of hanging"
mkrepo --unlock dgx2,dgx3
expect_rc 1 apply
expect_out "no terminal"
[[ $(param dgx3 modeset) == N ]] || fail "dgx3 changed without approval"

step "on a terminal apply asks, and only 'yes' goes on"
printf 'no\n' | script -qec "$FLEET -C $REPO --no-color apply" /dev/null >"$WORK/out" 2>&1 || true
expect_out "Only 'yes' will be accepted"
expect_out "Apply cancelled"
[[ $(param dgx3 modeset) == N ]] || fail "dgx3 changed after 'no'"
printf 'yes\n' | script -qec "$FLEET -C $REPO --no-color apply" /dev/null >"$WORK/out" 2>&1
expect_out "Apply complete"
[[ $(param dgx3 modeset) == Y ]] || fail "dgx3 not changed after 'yes'"

step "--target applies one resource and what it needs, nothing else"
mkrepo --unlock dgx1,dgx2,dgx3
sed -i 's/display_ram: unlocked/display_ram: default/' "$REPO/fleet.yaml"
mkrepo --unlock dgx1
expect_rc 0 plan --json --target display_ram.dgx3
python3 - "$WORK/out" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
nodes = {c["node"] for c in p["changes"]}
assert nodes == {"dgx3"}, nodes
acts = {c["address"]: c["action"] for c in p["changes"] if c["action"] != "noop"}
assert acts == {"display_ram.dgx3": "update"}, acts
PY
expect_rc 0 -q apply --auto-approve --target display_ram.dgx3
expect_no_out "Modifying"  # -q: errors and the report only
[[ $(param dgx3 modeset) == N ]] || fail "dgx3 not restored"
[[ $(param dgx1 modeset) == N ]] || fail "dgx1 changed outside the target"
expect_rc 2 plan --detailed-exitcode
expect_out "display_ram.dgx1"

step "no longer wanted: the unlock is restored to the recorded values"
mkrepo
expect_rc 0 apply --auto-approve
[[ $(param dgx2 modeset) == N && $(param dgx2 fbdev) == Y ]] || fail "dgx2 not restored"
assert_converged
echo PASS
