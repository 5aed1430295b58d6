#!/usr/bin/env bash
# fleet watch --heal against real serves (the stand-in engine in a container
# on simulated nodes; FLEET_TEST_ENGINE picks podman or docker):
# - a serve's container killed: healed within two rounds with the recorded
#   spec, one heal event, the plan empty afterwards;
# - a serve that garbles on its second chat: healed on its smoke failure,
#   then quarantined after `limit`; no try over five more rounds; fleet
#   status says quarantined; fleet heal reset lifts it;
# - a node whose free GPU memory stays under the need: no start, heal_wait
#   events, quarantine after the limit; an apply clears it;
# - a recipe edited while the watch runs: the serve is not replaced, and a
#   kill brings back the recorded spec, not the edited one;
# - an apply holding the state lock: heal waits (heal_wait events), and its
#   heal starts only after the apply ended;
# - an engine across two nodes whose worker is killed: every rank heals,
#   the worker first, the head last;
# - kill -9 of the watch in the middle of a heal: the state loads, and the
#   next watch finishes the heal.
# On docker nodes, only the first and the last (see below), on one node
# serving a alone.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/watch_log.sh"
source "$(dirname "$0")/registry.sh"
source "$(dirname "$0")/engine_image.sh"

PA=$(free_port)
PG=$(free_port)
PM=$(free_port)
PS=$(free_port)
PP=$(free_port)
LOG=$WORK/watch.jsonl
GIB=$((1024 * 1024 * 1024))
# HEAL_TEST_KEEP=DIR: a copy of the work folder (logs, state) is left there.
[[ -n ${HEAL_TEST_KEEP:-} ]] && trap 'cp -r "$WORK" "$HEAL_TEST_KEEP" 2>/dev/null; cleanup' EXIT

start_watch() {
  "$FLEET" -C "$REPO" --no-color watch --heal --every 1s --log "$LOG" \
    >>"$WORK/watch.out" 2>>"$WORK/watch.err" </dev/null &
  WATCH=$!
  BG_PIDS+=("$WATCH")
}
stop_watch() {
  kill -TERM "$WATCH"
  local rc=0
  wait "$WATCH" || rc=$?
  [[ $rc == 0 ]] || fail "fleet watch exited $rc: $(tail -5 "$WORK/watch.err")"
}
answers() { curl -sf -m 2 "http://127.0.0.1:$1/v1/models" >/dev/null; }
cid() { ce "$1" container inspect --format '{{.Id}}' "$2" 2>/dev/null; }
spec_label() { ce "$1" container inspect --format "'{{index .Config.Labels \"fleet.spec\"}}'" "$2"; }
cstate() { ce "$1" container inspect --format '{{.State.Status}}' "$2" 2>/dev/null; }
set_free() {  # set_free NODE BYTES: the simulated GPU's free memory
  local conf
  conf="$(node_root "$1")/sim/fake-gpu.conf"
  sed -i '/^free_bytes/d' "$conf"
  echo "free_bytes = $2" >>"$conf"
}
deployment() {  # deployment NAME NODE PORT RECIPE EXTRA_JSON
  echo "$1={\"recipe\": \"recipes/$4.toml\", \"nodes\": [\"$2\"], \"image\": \"eng\", \"port\": $3, \"health\": {\"path\": \"/v1/models\", \"timeout\": \"20s\"}, \"smoke\": [{\"name\": \"math\", \"chat\": \"What is 127*89?\", \"expect\": \"11303\", \"timeout\": \"10s\"}]$5}"
}
# On docker nodes (heal_docker_test) only what touches the engine runs: a
# kill healed, and kill -9 of the watch mid-heal, both of a. The policy's
# decisions (smoke, memory, quarantine, the lock, a recipe edited, a group)
# do not depend on the engine and run on podman (HEAL_TEST_FULL=1 runs them
# on docker too, as does lib.sh's FLEET_TEST_FULL=1). Without them, one
# node serving a is all docker needs (five dockerds and three serves took a
# third of its time).
FULL=
{ engine_free_phase || [[ -n ${HEAL_TEST_FULL:-} ]]; } && FULL=1
# A round probes every node the manifests name and checks every serve: the
# manifests name dgx4 and dgx5 only from the phase that uses them (ONLY),
# and g only until its phases are done (WITH_G; a garbling g heals and is
# quarantined again in every watch after its reset). Rounds took 5-13 s
# with all five nodes and g's heals in them.
ONLY=dgx1,dgx2,dgx3
WITH_G=1
write_repo() {  # write_repo [EXTRA mkrepo args]
  local others=()
  [[ -z $FULL || -z $WITH_G ]] || others+=(
    --deployment "$(deployment g dgx2 "$PG" garble ', "restart": {"on": ["exit", "smoke"], "backoff": "1s", "max_backoff": "1s", "limit": "2 in 30m"}')")
  [[ -z $FULL ]] || others+=(
    --deployment "$(deployment m dgx3 "$PM" e ', "gpu_memory": "100GiB", "restart": {"backoff": "1s", "max_backoff": "1s", "limit": "2 in 30m"}')")
  mkrepo ${ONLY:+--only "$ONLY"} --image "eng={\"ref\": \"$REGISTRY/fleet/engine@$D\", \"source\": \"registry\"}" \
    --deployment "$(deployment a dgx1 "$PA" e ', "restart": {"backoff": "1s", "max_backoff": "2s", "limit": "5 in 30m"}')" \
    "${others[@]}" "$@"
}

if [[ -n $FULL ]]; then
  step "registry, engine image, 5 nodes (dgx3 with a simulated H200), three serves"
  engine_fleet 5 --gpu dgx3=h200
else
  step "registry, engine image, 1 node, a serve"
  engine_fleet 1
fi
# One engine across two nodes: the head (rank 0) answers, the worker waits.
cat >"$REPO/recipes/pair.toml" <<'TOML'
model = ""
args = ["sh", "-c", "if [ {rank} = 0 ]; then exec fake-engine --port {port} --served-model-name qwen38; else exec busybox sleep 2147483647; fi"]
memory_limit = "256m"
TOML
engine_recipe garble 'env = {FAKE_ENGINE_GARBLE_AFTER = "1"}'
write_repo
expect_rc 0 apply --auto-approve
assert_converged
answers "$PA" || fail "a does not answer after apply"

step "a killed: healed within two rounds with the recorded spec, one heal event"
start_watch
for _ in $(seq 100); do (($(rounds) >= 1)) && break; nap 0.1; done
spec_a=$(spec_label dgx1 fleet-a)
ce dgx1 kill fleet-a >/dev/null
r0=$(rounds)
wait_event heal deployment.a@dgx1 healed 30 0
(($(rounds) - r0 <= 2)) || fail "a healed only after $(($(rounds) - r0)) rounds"
answers "$PA" || fail "a does not answer after its heal"
[[ $(spec_label dgx1 fleet-a) == "$spec_a" ]] || fail "a came back with another spec"

# (FULL: on podman, or HEAL_TEST_FULL=1; see write_repo above.)
if [[ -n $FULL ]]; then
# The three phases below watch other serves at once: g's five rounds left
# alone after its quarantine, m's heal waits and quarantine, and a's rounds
# with its recipe edited are the same rounds (each a few seconds), each
# serve's events counted on their own; each is checked once its rounds are done.
step "g garbles on its second chat: healed on smoke, quarantined after 2 (left alone: checked below)"
# m's node short of memory from now (m's phase kills it once two whole
# rounds saw the new figure: one that started before probed the old one).
set_free dgx3 $((40 * GIB))
r_free=$(rounds)
wait_event quarantine deployment.g@dgx2 quarantined 60 0
[[ $(events_of heal deployment.g@dgx2 healed) == 2 ]] ||
  fail "g: $(events_of heal deployment.g@dgx2 healed) heals before its quarantine, limit 2"
r_quarantine=$(rounds)
grep -q '"reason":"smoke"' "$LOG" || fail "no heal for a smoke reason"

step "m's node short of GPU memory: no start, heal_wait, quarantine after the limit (checked below)"
for _ in $(seq 600); do (($(rounds) >= r_free + 2)) && break; nap 0.1; done
(($(rounds) >= r_free + 2)) || fail "no 2 rounds after dgx3's free memory changed"
ce dgx3 kill fleet-m >/dev/null
# m's heal waits and its quarantine take three rounds: the next phase's
# rounds (a's, another serve and node) are those; m is checked after it.

step "a's recipe edited while the watch runs: a is not replaced; a kill brings back the recorded spec"
cp "$REPO/recipes/e.toml" "$WORK/e.toml"
sed -i 's/"qwen38"\]/"qwen38", "--host", "0.0.0.0"]/' "$REPO/recipes/e.toml"
id_a=$(cid dgx1 fleet-a)
r0=$(rounds)
for _ in $(seq 600); do (($(rounds) >= r0 + 3)) && break; nap 0.1; done
(($(rounds) >= r0 + 3)) || fail "no 3 rounds after the recipe's edit"
[[ $(cid dgx1 fleet-a) == "$id_a" ]] || fail "a was replaced after its recipe changed"
# the last round's line (m's events may follow it in the log)
grep '"round"' "$LOG" | tail -1 | grep -q 'deployment.a@dgx1 (replace)' || fail "the edit is not reported as drift"
n=$(events_of heal deployment.a@dgx1 healed)
ce dgx1 kill fleet-a >/dev/null
wait_event heal deployment.a@dgx1 healed 30 "$n"
[[ $(spec_label dgx1 fleet-a) == "$spec_a" ]] || fail "a came back with the edited spec"
cp "$WORK/e.toml" "$REPO/recipes/e.toml"

step "m: no start, heal_wait, quarantined after the limit"
(($(events_of quarantine deployment.m@dgx3 quarantined) > 0)) ||
  wait_event quarantine deployment.m@dgx3 quarantined 60 0
(($(events_of heal_wait deployment.m@dgx3 waiting) >= 2)) || fail "m: no heal_wait before its quarantine"
[[ $(events_of heal deployment.m@dgx3) == 0 ]] || fail "m was started without its memory"
grep -q 'waiting for memory on dgx3: 40.0 GiB free, needs 100.0 GiB' "$LOG" || fail "no memory wait text"
[[ $(cstate dgx3 fleet-m) != running ]] || fail "m runs"

step "g: left alone for five rounds after its quarantine"
for _ in $(seq 600); do (($(rounds) >= r_quarantine + 5)) && break; nap 0.1; done
(($(rounds) >= r_quarantine + 5)) || fail "no 5 rounds after the quarantine"
[[ $(events_of heal deployment.g@dgx2) == 2 ]] || fail "g was tried again after its quarantine"
stop_watch

step "status, events, heal reset"
expect_rc 0 status
expect_out "quarantined (2 heals in 30m; last: smoke math"
expect_out "quarantined (2 heals in 30m; last: waiting for memory on dgx3"
expect_rc 0 events --since 1h
expect_out "quarantine"
expect_out "deployment.g@dgx2"
expect_rc 0 events --json
python3 - "$WORK/out" <<'PY' || fail "events --json"
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1])]
kinds = {e["event"] for e in ev}
assert {"heal", "quarantine", "heal_wait"} <= kinds, kinds
for e in ev:
    assert e["time"] and e["address"] and "outcome" in e, e
PY
expect_rc 2 plan --detailed-exitcode
expect_out "quarantined by fleet watch --heal"
expect_rc 0 heal reset deployment.g@dgx2
expect_out "quarantine lifted"
python3 -c 'import json,sys; r=[x for x in json.load(open(sys.argv[1]))["resources"] if x["address"]=="deployment.g@dgx2"][0]; assert "heal" not in r["attributes"], r' \
  "$(state_file)" || fail "heal reset left g's ledger"

step "an apply clears m's quarantine once the memory is back (and drops g: its phases are done)"
set_free dgx3 $((130 * GIB))
WITH_G=
write_repo
expect_rc 0 apply --auto-approve
assert_converged
expect_rc 0 status
expect_no_out "quarantined"
answers "$PM" || fail "m does not answer after apply"

step "an apply holding the lock: heal waits, and heals only after it"
# A serve whose health never answers holds the apply in its health wait
# (health.timeout 12s), then fails and rolls back.
ONLY=  # dgx4 and dgx5 from here on
write_repo --deployment "s={\"recipe\": \"recipes/e.toml\", \"nodes\": [\"dgx4\"], \"image\": \"eng\", \"port\": $PS, \"health\": {\"path\": \"/never\", \"timeout\": \"12s\"}}"
rm -f "$LOG"
"$FLEET" -C "$REPO" --no-color apply --auto-approve >"$WORK/slow.out" 2>&1 </dev/null &
SLOW=$!
BG_PIDS+=("$SLOW")
# a is killed once the apply planned (holding the lock): the apply does not
# know, the watch must bring it back, after the apply.
for _ in $(seq 300); do grep -q '^Plan:' "$WORK/slow.out" && break; nap 0.1; done
grep -q '^Plan:' "$WORK/slow.out" || fail "the slow apply did not plan: $(cat "$WORK/slow.out")"
grep -q apply "$(state_file).lock" || fail "the slow apply does not hold the lock"
ce dgx1 kill fleet-a >/dev/null
start_watch
wait_event heal_wait deployment.a@dgx1 waiting 30 0
rc=0
wait "$SLOW" || rc=$?
applied_end=$(date +%s)
[[ $rc == 1 ]] || fail "the slow apply exited $rc, expected 1: $(tail -5 "$WORK/slow.out")"
[[ $(events_of heal deployment.a@dgx1) == 0 ]] || fail "a healed while the apply held the lock"
wait_event heal deployment.a@dgx1 healed 30 0
stop_watch
python3 - "$LOG" "$applied_end" <<'PY' || fail "the heal started before the apply ended"
import json, sys, datetime
end = int(sys.argv[2])
for line in open(sys.argv[1]):
    e = json.loads(line)
    if e.get("event") == "heal" and e.get("outcome") == "healed":
        t = datetime.datetime.strptime(e["time"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=datetime.timezone.utc)
        started = t.timestamp() - e["duration_s"]
        assert started >= end - 1, (started, end)
PY

step "an engine across two nodes: its worker killed, every rank heals, the worker first, the head last"
write_repo --deployment "p={\"recipe\": \"recipes/pair.toml\", \"nodes\": [\"dgx4\", \"dgx5\"], \"image\": \"eng\", \"port\": $PP, \"health\": {\"path\": \"/v1/models\", \"timeout\": \"20s\"}, \"restart\": {\"backoff\": \"1s\"}}"
expect_rc 0 apply --auto-approve
ce dgx5 kill fleet-p >/dev/null
rm -f "$LOG"
start_watch
wait_event heal deployment.p@dgx4 healed 60 0
stop_watch
python3 - "$LOG" <<'PY' || fail "the group did not heal worker first, head last: $(grep '"heal"' "$LOG")"
import json, sys
heals = [e for e in map(json.loads, open(sys.argv[1])) if e.get("event") == "heal"]
order = [(e["address"], e["reason"], e["outcome"]) for e in heals]
assert order == [("deployment.p@dgx5", "exit", "healed"), ("deployment.p@dgx4", "group", "healed")], order
PY
[[ $(cstate dgx5 fleet-p) == running && $(cstate dgx4 fleet-p) == running ]] || fail "a rank of p is not running"
answers "$PP" || fail "p's head does not answer after the group heal"
write_repo
else
  stop_watch
fi

step "kill -9 of the watch in the middle of a heal: the next watch finishes it"
# The engine's start of fleet-a takes 4 s: the watch is killed inside it.
engine_stand_in dgx1 '"start fleet-a"' 'sleep 4'
ce dgx1 kill fleet-a >/dev/null
rm -f "$LOG"
start_watch
wait_heal_started deployment.a@dgx1
kill -9 "$WATCH"
wait "$WATCH" 2>/dev/null || true
state_parses "$(state_file)" || fail "the state does not parse after kill -9"
engine_stand_in_off dgx1
expect_rc 0 state list
# (the heal is finished in its first round, or its second; a third says it
# stays so)
timeout 120 "$FLEET" -C "$REPO" --no-color watch --heal --every 1s --rounds 3 --log "$LOG" \
  >"$WORK/out" 2>"$WORK/err" </dev/null || fail "the next watch failed: $(cat "$WORK/err")"
answers "$PA" || fail "a does not answer after the next watch"
python3 - "$(state_file)" <<'PY' || fail "the heal was not finished"
import json, sys
r = [x for x in json.load(open(sys.argv[1]))["resources"] if x["address"] == "deployment.a@dgx1"][0]
assert not r["attributes"].get("heal", {}).get("in_progress_since"), r["attributes"]["heal"]
PY
[[ $(cstate dgx1 fleet-a) == running ]] || fail "a is not running"
! grep -q '"outcome":"failed"' "$LOG" || fail "a heal failed: $(grep failed "$LOG")"

step "converged: the plan is empty"
expect_rc 0 apply --auto-approve
assert_converged
! grep -q "$PWD" /dev/null
no_crash
echo "PASS heal_test"
