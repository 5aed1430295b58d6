#!/usr/bin/env bash
# fleet watch and fleet report against a real serve (the stand-in engine in
# a container on a simulated node):
# - 10 rounds, a garble fault injected after round 4: the log has one line
#   per round and exactly one change (round 5), with the prompt and reply;
#   --on-change got that one event on stdin; a loud line was printed;
# - the watch holds no state lock: an apply runs while it waits;
# - SIGTERM stops it cleanly with exit 0;
# - a node going away mid-watch: rounds go on, the check reports an error;
# - --report rewrites the page each round; fleet report writes one
#   self-contained HTML page from the log; headless chromium
#   renders its charts (latency, t/s) with the failures marked.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/registry.sh"
source "$(dirname "$0")/engine_image.sh"

P=$(free_port)
U=http://127.0.0.1:$P
LOG=$WORK/watch.jsonl
EVENTS=$WORK/events.jsonl
lines() { [[ -f $LOG ]] && wc -l <"$LOG" || echo 0; }
wait_lines() {  # wait_lines N PID: until the log has N lines (or the watch died)
  for _ in $(seq 600); do
    (($(lines) >= $1)) && return 0
    kill -0 "$2" 2>/dev/null || fail "fleet watch died: $(cat "$WORK/watch.out" "$WORK/watch.err")"
    sleep 0.1
  done
  fail "no $1 rounds in the log after 60 s: $(cat "$WORK/watch.out" "$WORK/watch.err")"
}

step "registry, engine image, 2 nodes, a serve on dgx1"
engine_fleet 2
mkrepo --image "eng={\"ref\": \"$REGISTRY/fleet/engine@$D\", \"source\": \"registry\"}" \
  --deployment "q={\"recipe\": \"recipes/e.toml\", \"nodes\": [\"dgx1\"], \"image\": \"eng\", \"port\": $P, \"health\": {\"path\": \"/v1/models\", \"timeout\": \"20s\"}, \"smoke\": [{\"name\": \"math\", \"chat\": \"What is 127*89?\", \"expect\": \"11303\", \"timeout\": \"10s\"}]}"
expect_rc 0 apply --auto-approve

step "10 rounds, a garble from round 5: exactly one change, with a sample"
"$FLEET" -C "$REPO" --no-color watch --every 1s --log "$LOG" --report "$WORK/live.html" \
  --on-change "cat >> '$EVENTS'" >"$WORK/watch.out" 2>"$WORK/watch.err" </dev/null &
WATCH=$!
wait_lines 4 $WATCH
curl -sf -X POST "$U/fault" -d garble >/dev/null || fail "fault"
# the state is not locked while the watch waits
expect_rc 0 apply --auto-approve
wait_lines 10 $WATCH
kill -TERM $WATCH
rc=0
wait $WATCH || rc=$?
[[ $rc == 0 ]] || fail "fleet watch exited $rc on SIGTERM: $(cat "$WORK/watch.err")"
grep -q "stopped (signal)" "$WORK/watch.out" || fail "no clean stop line"
python3 - "$LOG" "$EVENTS" <<'PY' || fail "watch log"
import json, sys
rounds = [json.loads(l) for l in open(sys.argv[1])]
assert len(rounds) >= 10, len(rounds)
changed = [r for r in rounds if r["changes"]]
assert len(changed) == 1, [(r["round"], r["changes"]) for r in changed]
c = changed[0]["changes"]
assert changed[0]["round"] in (5, 6), changed[0]["round"]  # the fault lands between rounds 4 and 5
assert len(c) == 1 and c[0]["key"] == "q@dgx1/math" and c[0]["to"] == "fail", c
assert "127*89" in c[0]["prompt"] and "!!!!" in c[0]["reply"], c
for r in rounds:
    assert r["drift"]["changes"] == 0, r["drift"]
    assert {x["check"] for x in r["checks"]} == {"identity", "model", "math"}, r
events = [json.loads(l) for l in open(sys.argv[2])]
assert len(events) == 1 and events[0]["event"] == "change", events
assert events[0]["round"]["round"] == changed[0]["round"]
PY
grep -q '^!!! fleet watch .* q@dgx1/math pass -> fail' "$WORK/watch.out" || fail "no loud line: $(cat "$WORK/watch.out")"
grep -q '"round":10' "$WORK/live.html" || fail "--report was not rewritten each round"

step "a node going away: the rounds go on and say so"
"$SIM" node-stop "$SIMDIR" dgx1 >/dev/null
rc=0
timeout 120 "$FLEET" -C "$REPO" --no-color watch --every 1s --rounds 2 --log "$WORK/gone.jsonl" \
  >"$WORK/out" 2>"$WORK/err" </dev/null || rc=$?
[[ $rc == 0 ]] || fail "watch with a node gone exited $rc"
[[ $(wc -l <"$WORK/gone.jsonl") == 2 ]] || fail "not 2 rounds with a node gone"
grep -q '"result":"error"' "$WORK/gone.jsonl" || fail "the gone node's check is not an error"
"$SIM" node-start "$SIMDIR" dgx1 >/dev/null

step "fleet report: one self-contained page that a real browser renders"
expect_rc 0 report "$LOG" -o "$WORK/report.html"
! grep -qE '(src|href)="?https?:' "$WORK/report.html" || fail "the report loads something from the network"
CHROMIUM=$(command -v chromium || command -v chromium-browser || true)
[[ -n $CHROMIUM ]] || fail "chromium is not installed (apt-get install chromium)"
timeout 120 "$CHROMIUM" --headless --no-sandbox --disable-gpu --disable-background-networking \
  --user-data-dir="$WORK/chromium" --dump-dom "file://$WORK/report.html" >"$WORK/dom.html" 2>"$WORK/chromium.err" ||
  fail "chromium: $(tail -5 "$WORK/chromium.err")"
grep -q 'data-rendered="3"' "$WORK/dom.html" || fail "the charts did not render: $(head -c 600 "$WORK/dom.html")"
grep -q '<path d="M ' "$WORK/dom.html" || fail "no plotted line"
[[ $(grep -o 'class="fail"' "$WORK/dom.html" | wc -l) -ge 5 ]] || fail "the failures are not marked"
grep -q 'deployment.q@dgx1' "$WORK/dom.html" || fail "the serve is not named"
no_crash
echo "PASS watch_test"
