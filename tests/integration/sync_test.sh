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

source "$(dirname "$0")/sync_lib.sh"

PA=$(free_port)
PB=$(free_port)

deployment() {  # deployment NAME NODE PORT
  echo "$1={\"recipe\": \"recipes/e.toml\", \"nodes\": [\"$2\"], \"image\": \"eng\", \"port\": $3, \"health\": {\"path\": \"/v1/models\", \"timeout\": \"20s\"}}"
}
# push_repo MESSAGE MKREPO-ARGS...: the operator writes the manifests and pushes.
push_repo() {
  local msg=$1
  shift
  python3 "$ROOT/tests/integration/mkrepo.py" --sim "$SIMDIR" --out "$OP" \
    --image "eng={\"ref\": \"$REGISTRY/fleet/engine@$D\", \"source\": \"registry\"}" "$@"
  commit_push "$msg"
}

step "registry, engine image, 2 nodes; the lab's checkout of a bare repo, applied by hand"
engine_fleet 2  # (its recipes/e.toml goes with the repo, replaced by the lab's clone below)
init_origin
REPO=$OP engine_recipe e
printf '.fleet/\n' >"$OP/.gitignore"
C0=$(push_repo "a on dgx1" --deployment "$(deployment a dgx1 "$PA")")
rm -rf "$REPO"
git clone -q "$ORIGIN" "$REPO"
expect_rc 0 apply --auto-approve
assert_converged

step "a pushed commit is applied within two rounds"
start_watch
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
stop_watch

step "fleet status and events show the sync"
expect_rc 0 status
expect_out "manifests commit applied by fleet watch --sync: $C1"
expect_rc 0 events --json
grep -q '"outcome":"refused"' "$WORK/out" || fail "the refusal is not in the state's history"
expect_rc 0 plan --detailed-exitcode
no_crash
echo "PASS sync_test"
