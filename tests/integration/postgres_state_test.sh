#!/usr/bin/env bash
# The PostgreSQL state backend against a real PostgreSQL that this test
# starts (tests/pg/pg-sim: initdb in a temp dir, Unix socket only, run as the
# postgres user): converge; two applies racing (one applies, the other fails
# within 3 s naming the holder); kill -9 of the holder mid-apply; the
# database stopped mid-apply; migration to the local file and back.
source "$(dirname "$0")/lib.sh"

PG_SIM=$ROOT/tests/pg/pg-sim
PGDIR=$WORK/pg
chmod 0711 "$WORK"  # the server runs as the postgres user, under $WORK
rc=0
conn=$("$PG_SIM" start "$PGDIR") || rc=$?
if ((rc == 77)); then
  echo "SKIP: PostgreSQL server binaries not installed"
  exit 77
fi
((rc == 0)) || fail "cannot start the test PostgreSQL"
trap 'kill_bg; "$PG_SIM" kill "$PGDIR"; cleanup' EXIT
# Trust auth ignores the password: it is there to prove it never leaks.
export FLEET_STATE_PG="$conn password=sekrit-pg-pw"
PG_STATE='{"backend": "postgres", "conn_env": "FLEET_STATE_PG", "schema": "fleet"}'
LOCAL_STATE='{"backend": "local", "conn_env": "FLEET_STATE_PG", "schema": "fleet"}'
sql() { psql -XAtq "$conn" -c "$1"; }
# lib.sh's helpers read the local file; with postgres the state is a row.
state_serial() {
  if grep -q 'backend": "postgres' "$REPO/fleet.yaml"; then
    sql "SELECT serial FROM fleet.states ORDER BY id DESC LIMIT 1"
  else
    python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["serial"])' "$(state_file)"
  fi
}
advisory_locks() { sql "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'"; }

start_fleet 3

step "converge with the postgres backend; the schema is made on first use"
mkrepo --state "$PG_STATE" --unlock dgx1
expect_rc 0 apply --auto-approve
[[ $(param dgx1 modeset) == Y ]] || fail "dgx1 not unlocked"
[[ ! -e $(state_file) ]] || fail "a local state file was written"
[[ $(sql "SELECT version FROM fleet.schema_version") == 1 ]] || fail "no schema version"
assert_converged
expect_rc 0 state history
expect_out "State history of PostgreSQL schema fleet"
expect_rc 0 state show --serial 1 display_ram.dgx1
expect_out '"address": "display_ram.dgx1"'

step "two applies racing: one applies, the other fails within 3 s naming the holder"
echo 3 >"$(node_root dgx2)/sim/modprobe-delay"
mkrepo --state "$PG_STATE" --unlock dgx1,dgx2
race() {  # race N: an apply, its output in $WORK/raceN, "rc ms" in $WORK/raceN.rc
  local start rc=0
  start=$(date +%s%N)
  "$FLEET" -C "$REPO" --no-color apply --auto-approve >"$WORK/race$1" 2>&1 </dev/null || rc=$?
  echo "$rc $((($(date +%s%N) - start) / 1000000))" >"$WORK/race$1.rc"
}
race 1 &
p1=$!
race 2 &
p2=$!
wait $p1 $p2
read -r rc1 ms1 <"$WORK/race1.rc"
read -r rc2 ms2 <"$WORK/race2.rc"
cat "$WORK/race1" "$WORK/race2" >>"$WORK/transcript"
if [[ $rc1 == 0 && $rc2 == 1 ]]; then loser=2 loser_ms=$ms2
elif [[ $rc1 == 1 && $rc2 == 0 ]]; then loser=1 loser_ms=$ms1
else fail "racing applies exited $rc1 and $rc2: $(cat "$WORK/race1" "$WORK/race2")"; fi
grep -q "state is locked by .* pid [0-9]* (apply)" "$WORK/race$loser" ||
  fail "the loser does not name the holder: $(cat "$WORK/race$loser")"
grep -q "force-unlock" "$WORK/race$loser" || fail "the loser does not say how to unlock"
((loser_ms < 3000)) || fail "the loser took ${loser_ms} ms"
echo "   loser exited 1 after ${loser_ms} ms"
[[ $(param dgx2 modeset) == Y ]] || fail "the winner did not apply"
rm -f "$(node_root dgx2)/sim/modprobe-delay"
assert_converged

step "kill -9 of the holder mid-apply: the lock goes with its session"
echo 5 >"$(node_root dgx3)/sim/modprobe-delay"
mkrepo --state "$PG_STATE" --unlock dgx1,dgx2,dgx3
bg_apply
wait_output "$WORK/bg.out" Modifying
[[ $(advisory_locks) == 1 ]] || fail "the apply holds no advisory lock"
kill -9 $bg
wait $bg 2>/dev/null || true
for _ in $(seq 30); do
  [[ $(advisory_locks) == 0 ]] && break
  sleep 0.1
done
[[ $(advisory_locks) == 0 ]] || fail "the lock outlived its holder"
expect_rc 0 show --json
python3 -c 'import json,sys; json.load(open(sys.argv[1]))' "$WORK/out" || fail "state does not parse"
rm -f "$(node_root dgx3)/sim/modprobe-delay"
expect_rc 0 apply --auto-approve
[[ $(param dgx3 modeset) == Y ]] || fail "re-apply did not converge"
assert_converged

step "PostgreSQL stopped mid-apply: the unsaved step is reported and apply stops"
for n in dgx1 dgx2; do echo 3 >"$(node_root $n)/sim/modprobe-delay"; done
mkrepo --state "$PG_STATE" --unlock dgx3
bg_apply --parallelism 1
wait_output "$WORK/bg.out" Modifying
"$PG_SIM" kill "$PGDIR"
rc=0
wait $bg || rc=$?
cat "$WORK/bg.out" >>"$WORK/transcript"
((rc == 1)) || fail "apply exited $rc with its database gone: $(cat "$WORK/bg.out")"
grep -Eq "Error: display_ram.dgx[12] .*writing state after display_ram.dgx[12]" "$WORK/bg.out" ||
  fail "the unsaved step is not reported: $(cat "$WORK/bg.out")"
grep -Eq "display_ram.dgx[12]: not started \(the state cannot be written" "$WORK/bg.out" ||
  fail "apply went on without its state: $(cat "$WORK/bg.out")"
[[ $(param dgx1 modeset)$(param dgx2 modeset) == *Y* ]] ||
  fail "both nodes were changed: apply did not stop"
"$PG_SIM" restart "$PGDIR" >/dev/null
for n in dgx1 dgx2; do rm -f "$(node_root $n)/sim/modprobe-delay"; done
expect_rc 2 plan --detailed-exitcode
expect_rc 0 apply --auto-approve
for n in dgx1 dgx2; do [[ $(param $n modeset) == N ]] || fail "$n not restored"; done
[[ $(param dgx3 modeset) == Y ]] || fail "dgx3 not unlocked"
assert_converged

step "migrate to the local file and back, lineage and serial kept"
lineage=$(sql "SELECT lineage FROM fleet.states ORDER BY id DESC LIMIT 1")
serial=$(state_serial)
expect_rc 0 state migrate --to local
expect_out "serial $serial"
mkrepo --state "$LOCAL_STATE" --unlock dgx3
[[ $(state_serial) == "$serial" ]] || fail "local serial $(state_serial), expected $serial"
grep -q "\"lineage\": \"$lineage\"" "$(state_file)" || fail "lineage not kept"
[[ $(cat "$REPO/.fleet/.gitignore" | grep -v '^#') == '*' ]] || fail ".fleet has no .gitignore"
expect_rc 0 plan --detailed-exitcode
mkrepo --state "$LOCAL_STATE" --unlock dgx2,dgx3
expect_rc 0 apply --auto-approve
serial=$(state_serial)
expect_rc 0 state migrate --to postgres
mkrepo --state "$PG_STATE" --unlock dgx2,dgx3
[[ $(state_serial) == "$serial" ]] || fail "postgres serial $(state_serial), expected $serial"
assert_converged
expect_rc 0 state history
expect_out "$lineage"

step "migrate refuses a target that holds another lineage"
expect_rc 0 show --json
mkdir -p "$REPO/other"
python3 - "$WORK/out" "$REPO/other/state.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
s["lineage"], s["serial"] = "another-lineage", s["serial"] + 5
json.dump(s, open(sys.argv[2], "w"))
PY
mkrepo --state '{"backend": "local", "path": "other/state.json"}' --unlock dgx2,dgx3
expect_rc 1 state migrate --to postgres
expect_out "already holds another state"
mkrepo --state "$PG_STATE" --unlock dgx2,dgx3
[[ $(state_serial) == "$serial" ]] || fail "the refused migrate wrote"

step "force-unlock ends a hung holder's session"
echo 4 >"$(node_root dgx1)/sim/modprobe-delay"
mkrepo --state "$PG_STATE" --unlock dgx1,dgx3
bg_apply
wait_output "$WORK/bg.out" Modifying
kill -STOP $bg
expect_rc 1 apply --auto-approve
id=$(sql "SELECT id FROM fleet.lock")
expect_out "lock id $id"
expect_rc 1 force-unlock not-the-id
expect_rc 0 force-unlock "$id"
kill -CONT $bg
rc=0
wait $bg || rc=$?
((rc == 1)) || fail "the unlocked holder exited $rc: $(cat "$WORK/bg.out")"
rm -f "$(node_root dgx1)/sim/modprobe-delay"
expect_rc 0 apply --auto-approve
assert_converged

step "the GitOps loop (examples/gitops/gitops.sh), run locally"
gitops() { FLEET=$FLEET FLEET_REPO=$REPO FLEET_PLAN_DIR=$WORK/gitops bash "$ROOT/examples/gitops/gitops.sh" "$@" >"$WORK/out" 2>"$WORK/err" </dev/null; }
mkrepo --state "$PG_STATE" --unlock dgx1
gitops validate || fail "gitops validate"
rc=0; gitops plan || rc=$?
((rc == 2)) || fail "gitops plan exited $rc, expected 2 (changes)"
grep -q "display_ram.dgx3" "$WORK/gitops/summary.md" || fail "no summary: $(cat "$WORK/gitops/summary.md")"
gitops apply || fail "gitops apply: $(cat "$WORK/err")"
[[ $(param dgx3 modeset) == N ]] || fail "the reviewed plan was not applied"
gitops drift || fail "drift right after apply"
echo N >"$(node_root dgx1)/sys/module/nvidia_drm/parameters/modeset"  # a hand-made change
rc=0; gitops drift || rc=$?
((rc == 2)) || fail "drift exited $rc, expected 2"
expect_rc 0 apply --auto-approve
assert_converged

step "adopt into a postgres state that does not know the fleet (another schema: a new team state)"
TEAM_STATE='{"backend": "postgres", "conn_env": "FLEET_STATE_PG", "schema": "fleet_team"}'
mkrepo --state "$TEAM_STATE" --unlock dgx1
expect_rc 2 plan --detailed-exitcode
expect_out "adopt node (record its identity)"
expect_rc 0 state adopt --all
for n in dgx1 dgx2 dgx3; do expect_out "Adopted node.$n"; done
expect_out "serial 1"
[[ $(sql "SELECT count(*) FROM fleet_team.states") == 1 ]] || fail "adopt --all wrote more than one version"
[[ $(sql "SELECT serial FROM fleet_team.states") == 1 ]] || fail "adopt --all did not write serial 1"
[[ $(sql "SELECT count(*) FROM fleet_team.states WHERE body LIKE '%node.dgx2%'") == 1 ]] ||
  fail "the adopted records are not in the state row"
expect_rc 0 state history
expect_out "State history of PostgreSQL schema fleet_team"
grep -cE '^1 ' "$WORK/out" | grep -qx 1 || fail "history does not list serial 1 once: $(cat "$WORK/out")"
expect_rc 0 state show --serial 1 node.dgx3
expect_out '"address": "node.dgx3"'
expect_rc 1 state adopt node.dgx1
expect_out "it is in the state already"
[[ $(sql "SELECT count(*) FROM fleet_team.states") == 1 ]] || fail "a refused adopt wrote a version"
[[ $(advisory_locks) == 0 ]] || fail "adopt left an advisory lock"
expect_rc 0 plan --detailed-exitcode  # every node adopted; display RAM is as declared
assert_converged
[[ $(sql "SELECT max(serial) FROM fleet_team.states") == 1 ]] || fail "the converged apply wrote a version"
[[ $(sql "SELECT max(serial) FROM fleet.states") -gt 1 ]] || fail "the first schema's state moved"

step "the connection string and its password never appear"
cat "$WORK/bg.out" >>"$WORK/transcript"
! grep -qF "sekrit-pg-pw" "$WORK/transcript" || fail "the password leaked into output"
! grep -qF "$conn" "$WORK/transcript" || fail "the connection string leaked into output"
[[ $(sql "SELECT count(*) FROM fleet.states WHERE body LIKE '%sekrit-pg-pw%'") == 0 ]] ||
  fail "the password is in the state"
echo PASS
