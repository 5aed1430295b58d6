#!/usr/bin/env bash
# Speed floors of smoke checks (issue #29): three serves of the stand-in
# engine (tests/sim/fake_engine) sharing one simulated node, all serving
# "qwen38":
#   fast   math with min_decode_tps: 40 and max_ttft: 2s, and a
#          fresh_context check (a 300 ms "prefill" for a prompt it has not
#          seen, none for the repeat) under max_ttft: 2s: passes;
#   slow   math with min_decode_tps: 40 while the engine streams a token
#          every 100 ms (10 t/s): fails "slow: 10.0 t/s < 40";
#   fresh  a fresh_context check with max_ttft: 1s while a prompt the engine
#          has not seen waits 1.5 s for its first token (the repeat does
#          not): fails "slow: fresh-context TTFT 1.5 s > 1 s (cached ...)".
# Each is shown in `fleet apply` (a smoke check under its floor fails the
# serve's step), `fleet check` (the table, --json with the floors and both
# TTFTs) and `fleet watch --rounds 1 --log` (the JSON line's results), and
# `fleet report` draws the floors and the cached TTFT line.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/registry.sh"
source "$(dirname "$0")/engine_image.sh"

PF=$(free_port)
PS=$(free_port)
PR=$(free_port)
fault() { curl -sf --max-time 5 -X POST "http://127.0.0.1:$1/fault" -d "$2" >/dev/null || fail "POST :$1/fault $2"; }

# recipe NAME TOKEN_MS [FRESH_DELAY_MS]: the stand-in engine on {port} as
# qwen38, a token every TOKEN_MS, a prompt not seen before waiting
# FRESH_DELAY_MS for its first token.
recipe() {
  engine_recipe "$1" "
[env]
FAKE_ENGINE_TOKEN_MS = \"$2\"
FAKE_ENGINE_FRESH_DELAY_MS = \"${3:-0}\""
}
MATH='"chat": "What is 127*89? Reply with the number only.", "expect": "11303", "timeout": "10s"'
SMOKE_FAST="[{\"name\": \"math\", $MATH, \"min_decode_tps\": 40, \"max_ttft\": \"2s\"},
  {\"name\": \"prefill\", \"fresh_context\": {\"tokens\": 2000}, \"max_ttft\": \"2s\", \"timeout\": \"10s\"}]"
SMOKE_SLOW="[{\"name\": \"decode\", $MATH, \"min_decode_tps\": 40}]"
SMOKE_FRESH='[{"name": "fresh", "fresh_context": {"tokens": 2000}, "max_ttft": "1s", "timeout": "10s"}]'
deployment() {  # deployment NAME PORT SMOKE
  echo "$1={\"recipe\": \"recipes/$1.toml\", \"nodes\": [\"dgx1\"], \"image\": \"eng\", \"port\": $2, \"shared\": true, \"health\": {\"path\": \"/v1/models\", \"timeout\": \"20s\"}, \"smoke\": $3}"
}
row() {  # row DEPLOYMENT CHECK RESULT: fleet check's table has that row
  grep -E "^$1 +dgx1 +$2 +$3 " "$WORK/out" >/dev/null || fail "no '$3' row for $1 $2"
}

step "registry, engine image, 1 node"
engine_fleet 1
mkrepo --image "eng={\"ref\": \"$REGISTRY/fleet/engine@$D\", \"source\": \"registry\"}" \
  --deployment "$(deployment fast "$PF" "$SMOKE_FAST")" \
  --deployment "$(deployment slow "$PS" "$SMOKE_SLOW")" \
  --deployment "$(deployment fresh "$PR" "$SMOKE_FRESH")"
recipe fast 2 300
recipe slow 100
recipe fresh 2 1500

step "apply: the fast serve passes its floors; a slow decode and a slow fresh prefill fail their steps"
expect_rc 1 apply --auto-approve
expect_out "smoke math: pass"
expect_out "smoke prefill: pass"
grep -qE "smoke check 'decode' on http://127\.0\.0\.1:$PS: fail: slow: [0-9.]+ t/s < 40" "$WORK/out" "$WORK/err" ||
  fail "apply does not fail slow's decode floor"
grep -qE "smoke check 'fresh' on http://127\.0\.0\.1:$PR: fail: slow: fresh-context TTFT [0-9.]+ s > 1 s \(cached [0-9.]+ s\)" \
  "$WORK/out" "$WORK/err" || fail "apply does not fail fresh's fresh-context TTFT"
curl -sf --max-time 5 "http://127.0.0.1:$PF/v1/models" >/dev/null || fail "the fast serve is not up"

step "apply with the engines fast: every check passes"
recipe slow 2
recipe fresh 2
expect_rc 0 apply --auto-approve
expect_out "smoke decode: pass"
expect_out "smoke fresh: pass"

step "fleet check: a slow decode and a slow fresh prefill fail, the fast serve passes"
fault "$PS" "token_ms 100"
fault "$PR" "fresh_delay 1500"
expect_rc 1 check
row fast math pass
row fast prefill pass
row slow decode fail
row fresh fresh fail
grep -qE "^FAIL deployment\.slow@dgx1 check decode \(.*\): slow: [0-9.]+ t/s < 40$" "$WORK/out" ||
  fail "check does not say why decode failed"
grep -qE "^FAIL deployment\.fresh@dgx1 check fresh \(.*\): slow: fresh-context TTFT [0-9.]+ s > 1 s \(cached [0-9.]+ s\)$" \
  "$WORK/out" || fail "check does not say why fresh failed"
expect_out "8 of 10 passed"
expect_rc 1 check --json
python3 - "$WORK/out" <<'PY' || fail "check --json"
import json, sys
j = json.load(open(sys.argv[1]))
r = {(x["deployment"], x["check"]): x for x in j["results"]}
m = r[("fast", "math")]
assert m["result"] == "pass" and m["min_decode_tps"] == 40 and m["max_ttft_s"] == 2, m
assert m["tps"] >= 40, m
p = r[("fast", "prefill")]
assert p["result"] == "pass" and p["max_ttft_s"] == 2 and "min_decode_tps" not in p, p
assert p["fresh_ttft_s"] >= 0.3 and p["cached_ttft_s"] < 0.3 and p["ttft_s"] == p["fresh_ttft_s"], p
d = r[("slow", "decode")]
assert d["result"] == "fail" and d["detail"].startswith("slow: ") and d["tps"] < 40, d
assert d["min_decode_tps"] == 40 and "max_ttft_s" not in d, d
f = r[("fresh", "fresh")]
assert f["result"] == "fail" and f["fresh_ttft_s"] > 1 and f["cached_ttft_s"] < 1, f
assert f["max_ttft_s"] == 1, f
PY

step "fleet watch --rounds 1: the JSON line's results"
LOG=$WORK/watch.jsonl
expect_rc 0 watch --rounds 1 --log "$LOG"
python3 - "$LOG" <<'PY' || fail "watch log: $(cat "$LOG")"
import json, sys
rounds = [json.loads(l) for l in open(sys.argv[1])]
assert len(rounds) == 1, len(rounds)
r = {(x["deployment"], x["check"]): x for x in rounds[0]["checks"]}
assert r[("fast", "math")]["result"] == "pass", r[("fast", "math")]
assert r[("fast", "math")]["min_decode_tps"] == 40 and r[("fast", "math")]["max_ttft_s"] == 2
assert r[("fast", "prefill")]["result"] == "pass", r[("fast", "prefill")]
assert r[("fast", "prefill")]["cached_ttft_s"] < r[("fast", "prefill")]["fresh_ttft_s"]
d = r[("slow", "decode")]
assert d["result"] == "fail" and " t/s < 40" in d["detail"] and d["min_decode_tps"] == 40, d
f = r[("fresh", "fresh")]
assert f["result"] == "fail" and "fresh-context TTFT" in f["detail"], f
assert f["fresh_ttft_s"] > 1 and f["cached_ttft_s"] < 1 and f["max_ttft_s"] == 1, f
PY

step "fleet report: the floors and the cached TTFT line drawn"
expect_rc 0 report "$LOG" -o "$WORK/report.html"
CHROMIUM=$(command -v chromium || command -v chromium-browser || true)
if [[ -n $CHROMIUM ]]; then
  timeout 120 "$CHROMIUM" --headless --no-sandbox --disable-gpu --disable-background-networking \
    --user-data-dir="$WORK/chromium" --dump-dom "file://$WORK/report.html" >"$WORK/dom.html" 2>"$WORK/chromium.err" ||
    fail "chromium: $(tail -5 "$WORK/chromium.err")"
  grep -q 'data-rendered="9"' "$WORK/dom.html" || fail "3 charts for each of 3 serves did not render"
  # fast: max_ttft of math and prefill, min_decode_tps of math; slow: its
  # min_decode_tps; fresh: its max_ttft.
  [[ $(grep -o 'class="floor"' "$WORK/dom.html" | wc -l) == 5 ]] || fail "not 5 floor lines"
  [[ $(grep -o 'stroke-dasharray="5,3"' "$WORK/dom.html" | wc -l) == 2 ]] || fail "not 2 cached TTFT lines"
else
  echo "chromium not installed: the report's drawing not checked"
fi
no_crash
echo "PASS smoke_speed_test"
