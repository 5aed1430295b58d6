#!/usr/bin/env bash
# kill -9 of apply at random moments never leaves an unparseable state, and
# a re-apply converges.
source "$(dirname "$0")/lib.sh"

start_fleet 4
RANDOM=42
sets=("dgx1,dgx2" "dgx3" "dgx1,dgx2,dgx3,dgx4" "" "dgx2,dgx4")
for i in $(seq 12); do
  mkrepo --unlock "${sets[$((i % ${#sets[@]}))]}"
  "$FLEET" -C "$REPO" --no-color apply --auto-approve >"$WORK/bg.out" 2>&1 &
  pid=$!
  sleep "0.$((RANDOM % 6))$((RANDOM % 10))"
  kill -9 $pid 2>/dev/null || true
  wait $pid 2>/dev/null || true
  if [[ -e $(state_file) ]]; then
    state_parses "$(state_file)" || fail "iteration $i: state does not parse"
  fi
  step "iteration $i: state parses"
done

step "a re-apply converges"
mkrepo --unlock dgx1,dgx3
expect_rc 0 apply --auto-approve
for n in dgx1 dgx3; do [[ $(param $n modeset) == Y ]] || fail "$n not unlocked"; done
for n in dgx2 dgx4; do [[ $(param $n modeset) == N ]] || fail "$n not default"; done
assert_converged
ls "$REPO/.fleet" | grep -q '\.tmp\.' && fail "temp files left behind"
echo PASS
