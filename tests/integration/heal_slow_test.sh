#!/usr/bin/env bash
# fleet watch --heal against serves that boot as the lab's do. Time is
# scaled 1/60 and the lab's ratios are kept: a 20-minute boot is 20 s, the
# watch's 2-minute round 2 s, health.timeout 30m 30 s, a 15-minute boot
# (the quarantine phase) 15 s against a window of 1h -> 60 s and a limit
# of 5, so that (as in the lab) the window never holds `limit` tries;
# --heal-wait 0s (the default 30 s is a quarter of a 2-minute round: 0.5 s
# scaled, under the watch's 1 s grain).
# - a serve killed is healed while its boot takes 20 s: the watch reports
#   every round meanwhile, and an `apply --target` of another deployment
#   runs beside the heal (the lock is not held across the boot);
# - a serve that boots and then fails its smoke check every time is
#   quarantined after `limit` tries, though the window never holds them
#   (not with HEAL_SLOW_CASES=boot: the docker run stops before it);
# - an apply that replaces a serve while it heals takes the heal over:
#   the heal says "taken over", and there is one container (podman only).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/watch_log.sh"
source "$(dirname "$0")/registry.sh"
source "$(dirname "$0")/engine_image.sh"

PA=$(free_port)
PB=$(free_port)
PQ=$(free_port)
LOG=$WORK/watch.jsonl

# slow_recipe NAME BOOT_S [ENV]: the stand-in engine, answering only after
# BOOT_S seconds (shards streaming from the NAS).
slow_recipe() {
  printf '%s\n' 'model = ""' \
    "args = [\"sh\", \"-c\", \"busybox sleep $2; exec fake-engine --port {port} --served-model-name qwen38\"]" \
    'memory_limit = "256m"' "${3:-}" >"$REPO/recipes/$1.toml"
}
dep() {  # dep NAME NODE PORT RECIPE EXTRA_JSON
  echo "$1={\"recipe\": \"recipes/$4.toml\", \"nodes\": [\"$2\"], \"image\": \"eng\", \"port\": $3, \"health\": {\"path\": \"/v1/models\", \"timeout\": \"30s\"}, \"smoke\": [{\"name\": \"math\", \"chat\": \"What is 127*89?\", \"expect\": \"11303\", \"timeout\": \"10s\"}]$5}"
}
write_repo() {
  mkrepo --image "eng={\"ref\": \"$REGISTRY/fleet/engine@$D\", \"source\": \"registry\"}" \
    --deployment "$(dep a dgx1 "$PA" slow ', "restart": {"backoff": "1s", "max_backoff": "2s", "limit": "5 in 1h"}')" \
    --deployment "$(dep b dgx2 "$PB" e '')" "$@"
}

step "registry, engine image, 3 nodes; a boots in 20 s (20 minutes scaled)"
engine_fleet 3
slow_recipe slow 20
write_repo
expect_rc 0 apply --auto-approve
assert_converged

step "a killed: healed across its 20 s boot, every round reported, an apply beside it"
"$FLEET" -C "$REPO" --no-color watch --heal --every 2s --heal-wait 0s --log "$LOG" \
  >"$WORK/watch.out" 2>&1 </dev/null &
WATCH=$!
BG_PIDS+=("$WATCH")
for _ in $(seq 100); do (($(rounds) >= 1)) && break; nap 0.1; done
ce dgx1 kill fleet-a >/dev/null
wait_heal_started deployment.a@dgx1
r_start=$(rounds)
t_start=$SECONDS
# b changes while a heals: its apply takes the lock, which the heal does not hold.
engine_recipe e 'env = {FAKE_ENGINE_TOKEN_MS = "3"}'
expect_rc 0 apply --auto-approve --target deployment.b@dgx2
expect_out "deployment.b@dgx2"
((SECONDS - t_start < 18)) || fail "the apply beside the heal took $((SECONDS - t_start)) s: it waited for the heal"
wait_event heal deployment.a@dgx1 healed 60
r_end=$(rounds)
((r_end - r_start >= 5)) || fail "only $((r_end - r_start)) rounds reported during a's 20 s heal"
python3 - "$LOG" <<'PY' || fail "the heal's duration: $(grep '"heal"' "$LOG" | tail -2)"
import json, sys
h = [e for e in map(json.loads, open(sys.argv[1])) if e.get("event") == "heal" and e.get("outcome") == "healed"]
assert h and h[-1]["duration_s"] >= 19, h
PY
curl -sf -m 2 "http://127.0.0.1:$PA/v1/models" >/dev/null || fail "a does not answer after its heal"
kill -TERM "$WATCH"
wait "$WATCH" || fail "the watch exited $?"
echo "rounds during the heal: $((r_end - r_start)); the apply beside it: done"

if [[ ${HEAL_SLOW_CASES:-all} == boot ]]; then
  no_crash
  echo "PASS heal_slow_test (the heal across a slow boot only)"
  exit 0
fi

step "a killed and, while it heals, replaced by an apply: the apply takes it over, one container"
"$FLEET" -C "$REPO" --no-color watch --heal --every 2s --heal-wait 0s --log "$LOG" \
  >"$WORK/watch.out" 2>&1 </dev/null &
WATCH=$!
BG_PIDS+=("$WATCH")
ce dgx1 kill fleet-a >/dev/null
wait_heal_started deployment.a@dgx1
# A new spec for a (a shorter boot): the apply replaces the serve the heal
# is bringing back.
slow_recipe slow 10
expect_rc 0 apply --auto-approve --target deployment.a@dgx1
expect_out "deployment.a@dgx1"
wait_event heal deployment.a@dgx1 "taken over" 60
n=$(ce dgx1 "ps -a --format '{{.Names}}'" | grep -c '^fleet-a$' || true)
[[ $n == 1 ]] || fail "$n containers named fleet-a after the apply took the heal over"
kill -TERM "$WATCH"
wait "$WATCH" || fail "the watch exited $?"
expect_rc 0 plan --detailed-exitcode --target deployment.a@dgx1

step "q boots in 15 s and then fails its smoke check every time: quarantined after limit 5"
slow_recipe garble 15 'env = {FAKE_ENGINE_GARBLE_AFTER = "1"}'
write_repo --deployment "$(dep q dgx3 "$PQ" garble ', "restart": {"on": ["smoke"], "backoff": "1s", "max_backoff": "1s", "limit": "5 in 1m"}')"
expect_rc 0 apply --auto-approve --target deployment.q@dgx3
rm -f "$LOG"
"$FLEET" -C "$REPO" --no-color watch --heal --every 2s --heal-wait 0s --log "$LOG" \
  >"$WORK/watch.out" 2>&1 </dev/null &
WATCH=$!
BG_PIDS+=("$WATCH")
wait_event quarantine deployment.q@dgx3 quarantined 240
heals=$(events_of heal deployment.q@dgx3)
[[ $heals == 5 ]] || fail "q: $heals heals before its quarantine, limit 5: $(grep -v '"round"' "$LOG")"
python3 - "$LOG" <<'PY' || fail "the window held the limit: the case tests nothing: $(grep -v '"round"' "$LOG")"
import json, sys
tries = [e["attempt"] for e in map(json.loads, open(sys.argv[1])) if e.get("event") == "heal"]
assert max(tries) < 5, tries  # tries in the window when each heal ended
PY
grep '"quarantine"' "$LOG" | grep -q 'heals in a row did not hold' || fail "the quarantine does not say why: $(grep quarantine "$LOG")"
kill -TERM "$WATCH"
wait "$WATCH" || fail "the watch exited $?"
no_crash
echo "PASS heal_slow_test"
