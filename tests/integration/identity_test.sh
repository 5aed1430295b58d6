#!/usr/bin/env bash
# A changed host key, an unknown host key and a hostname mismatch are all
# refused with exit 1, and nothing is written (state, known_hosts).
source "$(dirname "$0")/lib.sh"

start_fleet 2
mkrepo
expect_rc 0 apply --auto-approve
state_sum=$(sha256sum "$(state_file)")
kh=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["known_hosts"])' "$SIMDIR/sim.json")
kh_sum=$(sha256sum "$kh")

step "changed host key is refused"
"$SIM" rekey "$SIMDIR" dgx2 >/dev/null
expect_rc 1 plan
expect_out "dgx2"
grep -qi "changed" "$WORK/out" "$WORK/err" || fail "message does not say the key changed"
expect_rc 1 apply --auto-approve
[[ $(sha256sum "$(state_file)") == "$state_sum" ]] || fail "state written"
[[ $(sha256sum "$kh") == "$kh_sum" ]] || fail "known_hosts written"

step "hostname mismatch is refused, naming both names"
mkrepo --only dgx1 --hostname dgx1=dgx9
expect_rc 1 plan
expect_out "dgx9"
expect_out "'dgx1'"
expect_rc 1 apply --auto-approve
[[ $(sha256sum "$(state_file)") == "$state_sum" ]] || fail "state written"

step "unknown host key is refused and known_hosts stays empty"
mkrepo --only dgx1
: >"$WORK/empty_known_hosts"
sed -i "s|known_hosts: [^}]*}|known_hosts: $WORK/empty_known_hosts}|" "$REPO/fleet.yaml"
expect_rc 1 plan
[[ ! -s $WORK/empty_known_hosts ]] || fail "known_hosts was written"
no_crash
echo PASS
