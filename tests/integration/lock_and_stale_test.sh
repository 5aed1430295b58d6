#!/usr/bin/env bash
# A saved plan is refused once the state moved on; a second apply while one
# holds the lock fails fast and names the holder; force-unlock breaks a lock.
source "$(dirname "$0")/lib.sh"

start_fleet 2
mkrepo --unlock dgx1

step "a saved plan applies exactly, on a fresh state too"
expect_rc 0 plan -out "$WORK/p1"
[[ $(stat -c %a "$WORK/p1") == 600 ]] || fail "plan file mode"
expect_rc 0 show "$WORK/p1"
expect_out "display_ram.dgx1"
expect_rc 0 apply "$WORK/p1"
[[ $(param dgx1 modeset) == Y ]] || fail "saved plan not applied"

step "a saved plan is refused after the state moved on"
mkrepo --unlock dgx1,dgx2
expect_rc 0 plan -out "$WORK/p2"
mkrepo
expect_rc 0 apply --auto-approve
serial=$(state_serial)
expect_rc 1 apply "$WORK/p2"
expect_out "stale"
[[ $(param dgx2 modeset) == N ]] || fail "stale plan applied"
[[ $(state_serial) == "$serial" ]] || fail "stale apply wrote state"

step "a second apply fails fast while the first holds the lock"
echo 4 >"$(node_root dgx2)/sim/modprobe-delay"
mkrepo --unlock dgx2
bg_apply
wait_output "$WORK/bg.out" Modifying
start=$(date +%s%N)
expect_rc 1 apply --auto-approve
elapsed_ms=$(( ($(date +%s%N) - start) / 1000000 ))
expect_out "locked"
expect_out "apply"
expect_out "pid $bg"
expect_out "force-unlock"
((elapsed_ms < 3000)) || fail "lock refusal took ${elapsed_ms} ms"
# A CI job queued behind an operator waits for the lock instead of failing.
expect_rc 0 plan --lock-timeout 60s --detailed-exitcode
kill -0 $bg 2>/dev/null && fail "plan --lock-timeout did not wait for the apply"
wait $bg || fail "the first apply failed: $(cat "$WORK/bg.out")"
[[ $(param dgx2 modeset) == Y ]] || fail "first apply did not finish"

step "a saved plan is refused when the manifests changed, with the reason"
mkrepo --unlock dgx1
expect_rc 0 plan -out "$WORK/p3" --markdown "$WORK/summary.md"
grep -Eq "^### fleet plan: [0-9]+ to create, [0-9]+ to update" "$WORK/summary.md" ||
  fail "markdown summary: $(cat "$WORK/summary.md")"
grep -q "display_ram.dgx1" "$WORK/summary.md" || fail "summary lacks the change"
expect_rc 0 show --markdown "$WORK/p3"
diff -u "$WORK/summary.md" "$WORK/out" || fail "show --markdown differs from plan --markdown"
echo "# reviewed, then edited" >>"$REPO/fleet.yaml"
expect_rc 1 apply "$WORK/p3"
expect_out "no longer matches the manifests: fleet.yaml changed"
[[ $(param dgx1 modeset) == N ]] || fail "the refused plan was applied"
[[ $(grep -v '^#' "$REPO/.fleet/.gitignore") == '*' ]] || fail ".fleet has no .gitignore of *"

step "force-unlock breaks a lock held by a stuck process, only with its id"
mkrepo
bg_apply
wait_output "$WORK/bg.out" Modifying
kill -STOP $bg
id=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["id"])' "$(state_file).lock")
expect_rc 1 force-unlock not-the-id
expect_rc 0 force-unlock "$id"
expect_rc 0 plan
kill -KILL $bg
wait $bg 2>/dev/null || true
rm -f "$(node_root dgx2)/sim/modprobe-delay"
expect_rc 0 apply --auto-approve
assert_converged
echo PASS
