#!/usr/bin/env bash
# fleet watch --sync: pull-based GitOps against a local bare repo.
# - a pushed commit is applied within two rounds; the checkout and the
#   state's synced commit move to it; the plan is empty after;
# - a broken commit is reported (file:line:column), not applied, not tried
#   again, and the lab keeps the last good one;
# - a commit whose plan destroys waits for a person;
# - a force-push backwards is refused.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/registry.sh"
source "$(dirname "$0")/engine_image.sh"

PA=$(free_port)
PB=$(free_port)
LOG=$WORK/watch.jsonl
ORIGIN=$WORK/origin.git
OP=$WORK/operator
export GIT_AUTHOR_NAME=fleet-test GIT_AUTHOR_EMAIL=test@fleet.invalid
export GIT_COMMITTER_NAME=fleet-test GIT_COMMITTER_EMAIL=test@fleet.invalid

rounds() {
  local n
  n=$(grep -c '"round"' "$LOG" 2>/dev/null)
  echo "${n:-0}"
}
# sync_events OUTCOME COMMIT: how many sync events of that outcome for COMMIT.
sync_events() {
  python3 - "$LOG" "$1" "$2" <<'PY'
import json, sys
n = 0
for line in open(sys.argv[1]):
    e = json.loads(line)
    n += e.get("event") == "sync" and e.get("outcome") == sys.argv[2] and e.get("commit") == sys.argv[3]
print(n)
PY
}
wait_sync() {  # wait_sync OUTCOME COMMIT SECONDS
  for _ in $(seq $(($3 * 10))); do
    (($(sync_events "$1" "$2") > 0)) && return 0
    kill -0 "$WATCH" 2>/dev/null || fail "fleet watch died: $(tail -20 "$WORK/watch.out" "$WORK/watch.err")"
    sleep 0.1
  done
  fail "no sync $1 event for $2 within $3 s: $(grep '"sync"' "$LOG" | tail -3; tail -10 "$WORK/watch.out")"
}
synced() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1])).get("sync",{}).get("commit",""))' "$(state_file)"; }
deployment() {  # deployment NAME NODE PORT
  echo "$1={\"recipe\": \"recipes/e.toml\", \"nodes\": [\"$2\"], \"image\": \"eng\", \"port\": $3, \"health\": {\"path\": \"/v1/models\", \"timeout\": \"20s\"}}"
}
# push_repo MESSAGE MKREPO-ARGS...: the operator writes the manifests and pushes.
push_repo() {
  local msg=$1
  shift
  python3 "$ROOT/tests/integration/mkrepo.py" --sim "$SIMDIR" --out "$OP" \
    --image "eng={\"ref\": \"$REGISTRY/fleet/engine@$D\", \"source\": \"registry\"}" "$@"
  git -C "$OP" add -A
  git -C "$OP" commit -qm "$msg"
  git -C "$OP" push -q origin HEAD:main
  git -C "$OP" rev-parse HEAD
}

step "registry, engine image, 2 nodes; the lab's checkout of a bare repo, applied by hand"
engine_fleet 2  # (its recipes/e.toml goes with the repo, replaced by the lab's clone below)
git init -q --bare -b main "$ORIGIN"
git init -q -b main "$OP"
git -C "$OP" remote add origin "$ORIGIN"
REPO=$OP engine_recipe e
printf '.fleet/\n' >"$OP/.gitignore"
C0=$(push_repo "a on dgx1" --deployment "$(deployment a dgx1 "$PA")")
rm -rf "$REPO"
git clone -q "$ORIGIN" "$REPO"
expect_rc 0 apply --auto-approve
assert_converged

step "a pushed commit is applied within two rounds"
"$FLEET" -C "$REPO" --no-color watch --sync --every 1s --log "$LOG" \
  >"$WORK/watch.out" 2>"$WORK/watch.err" </dev/null &
WATCH=$!
BG_PIDS+=("$WATCH")
for _ in $(seq 100); do (($(rounds) >= 1)) && break; sleep 0.1; done
C1=$(push_repo "b on dgx2" --deployment "$(deployment a dgx1 "$PA")" --deployment "$(deployment b dgx2 "$PB")")
r0=$(rounds)
wait_sync applied "$C1" 60
(($(rounds) - r0 <= 2)) || fail "C1 applied only $(($(rounds) - r0)) rounds after its push"
curl -sf "http://127.0.0.1:$PB/v1/models" >/dev/null || fail "b does not answer"
[[ $(synced) == "$C1" ]] || fail "the state's synced commit is $(synced), not $C1"
[[ $(git -C "$REPO" rev-parse HEAD) == "$C1" ]] || fail "the checkout did not move to $C1"

step "a broken commit: reported, not applied, not tried again; the lab keeps the last good one"
cp "$OP/fleet.yaml" "$WORK/good.yaml"
sed -i 's/^fleet: sim$/fleet: sim\nbogus_key: 1/' "$OP/fleet.yaml"
git -C "$OP" commit -qam "broken"
git -C "$OP" push -q origin HEAD:main
C2=$(git -C "$OP" rev-parse HEAD)
wait_sync failed "$C2" 60
grep '"outcome":"failed"' "$LOG" | grep -q 'fleet.yaml:3:1' || fail "the failure does not name fleet.yaml:3:1: $(grep failed "$LOG")"
r0=$(rounds)
for _ in $(seq 100); do (($(rounds) >= r0 + 3)) && break; sleep 0.1; done
[[ $(sync_events failed "$C2") == 1 ]] || fail "the broken commit was tried again"
[[ $(synced) == "$C1" && $(git -C "$REPO" rev-parse HEAD) == "$C1" ]] || fail "the lab left $C1"
curl -sf "http://127.0.0.1:$PB/v1/models" >/dev/null || fail "b stopped answering"

step "a commit whose plan destroys waits for a person"
C3=$(push_repo "drop b" --deployment "$(deployment a dgx1 "$PA")")
wait_sync waiting "$C3" 60
grep '"outcome":"waiting"' "$LOG" | grep -q 'destroy deployment.b@dgx2' || fail "the wait does not say what it would destroy"
curl -sf "http://127.0.0.1:$PB/v1/models" >/dev/null || fail "b was destroyed"
[[ $(synced) == "$C1" ]] || fail "the destroying commit was recorded as synced"

step "a force-push backwards is refused"
git -C "$OP" reset -q --hard "$C0"
echo "# rewritten" >>"$OP/fleet.yaml"
git -C "$OP" commit -qam "rewritten history"
git -C "$OP" push -qf origin HEAD:main
C4=$(git -C "$OP" rev-parse HEAD)
wait_sync refused "$C4" 60
[[ $(synced) == "$C1" ]] || fail "the force-push moved the synced commit"
kill -TERM "$WATCH"
wait "$WATCH" || fail "fleet watch exited $?"

step "fleet status and events show the sync"
expect_rc 0 status
expect_out "manifests commit applied by fleet watch --sync: $C1"
expect_rc 0 events --json
grep -q '"outcome":"refused"' "$WORK/out" || fail "the refusal is not in the state's history"
expect_rc 0 plan --detailed-exitcode
no_crash
echo "PASS sync_test"
