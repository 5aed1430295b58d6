#!/usr/bin/env bash
# fleet watch --metrics-listen against real serves (the stand-in engine on
# two simulated nodes, dgx1 with a simulated GB10), and a real Prometheus:
# - a scrape passes `promtool check metrics`, and its values are those of
#   the round's JSON line (serves up, smoke success with one check failing,
#   TTFT, t/s, GPU memory, drift, serial);
# - Prometheus (Debian's package) scrapes the watch: its query API says
#   fleet_deployment_up is 1, then 0 within two rounds of the serve's
#   container being killed;
# - a bad --metrics-listen is refused with a clear error;
# - fleet endpoints gives each serve's base URL and model (table, JSON,
#   a LiteLLM model_list).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/registry.sh"
source "$(dirname "$0")/engine_image.sh"
command -v promtool >/dev/null && command -v prometheus >/dev/null ||
  { echo "SKIP: needs Debian's prometheus package (promtool, prometheus)"; exit 77; }

PA=$(free_port)
PB=$(free_port)
PM=$(free_port)
PP=$(free_port)
LOG=$WORK/watch.jsonl
M=http://127.0.0.1:$PM/metrics

deployment() {  # deployment NAME NODE PORT
  echo "$1={\"recipe\": \"recipes/e.toml\", \"nodes\": [\"$2\"], \"image\": \"eng\", \"port\": $3, \"health\": {\"path\": \"/v1/models\", \"timeout\": \"20s\"}, \"smoke\": [{\"name\": \"math\", \"chat\": \"What is 127*89?\", \"expect\": \"11303\", \"timeout\": \"10s\"}]}"
}
# sample NAME LABELS: the value of that sample in $WORK/scrape ("" if none)
sample() { awk -v k="$1{$2}" '$1 == k {print $2}' "$WORK/scrape"; }
rounds_scraped() { curl -sf -m 2 "$M" | awk '$1 == "fleet_watch_rounds_total" {print $2}'; }
# prom_query EXPR: the first result's value from Prometheus's query API ("" if none)
prom_query() {
  curl -sf -m 2 "http://127.0.0.1:$PP/api/v1/query" --data-urlencode "query=$1" |
    python3 -c 'import json,sys; r=json.load(sys.stdin)["data"]["result"]; print(r[0]["value"][1] if r else "")' 2>/dev/null
}

step "registry, engine image, 2 nodes (dgx1 a simulated GB10), a serve on each"
engine_fleet 2 --gpu dgx1=gb10
mkrepo --image "eng={\"ref\": \"$REGISTRY/fleet/engine@$D\", \"source\": \"registry\"}" \
  --deployment "$(deployment a dgx1 "$PA")" --deployment "$(deployment b dgx2 "$PB")"
expect_rc 0 apply --auto-approve
curl -sf -X POST "http://127.0.0.1:$PB/fault" -d garble >/dev/null || fail "fault"

step "fleet endpoints: the clients' base URLs and models, from the state"
expect_rc 0 endpoints --json
python3 - "$WORK/out" "$PA" "$PB" <<'PY' || fail "endpoints --json: $(cat "$WORK/out")"
import json, sys
eps = {e["deployment"]: e for e in json.load(open(sys.argv[1]))}
assert eps["a"] == {"deployment": "a", "node": "dgx1", "base_url": "http://127.0.0.1:%s/v1" % sys.argv[2], "model": "qwen38"}, eps
assert eps["b"]["base_url"] == "http://127.0.0.1:%s/v1" % sys.argv[3], eps
PY
expect_rc 0 endpoints --format litellm
expect_out "api_base: \"http://127.0.0.1:$PA/v1\""
expect_out 'model: "openai/qwen38"'
expect_rc 0 endpoints
expect_out "http://127.0.0.1:$PB/v1"

step "a bad --metrics-listen is refused"
expect_rc 1 watch --rounds 1 --metrics-listen nowhere
expect_out "--metrics-listen nowhere: expected ADDR:PORT"

step "a scrape: promtool check metrics passes, the values are the round's line"
"$FLEET" -C "$REPO" --no-color watch --every 2s --log "$LOG" --metrics-listen "127.0.0.1:$PM" \
  >"$WORK/watch.out" 2>"$WORK/watch.err" </dev/null &
WATCH=$!
BG_PIDS+=("$WATCH")
for _ in $(seq 300); do [[ -n $(rounds_scraped) ]] && break; sleep 0.1; done
curl -sf "$M" >"$WORK/scrape" || fail "no scrape: $(cat "$WORK/watch.err")"
promtool check metrics <"$WORK/scrape" || fail "promtool check metrics: $(promtool check metrics <"$WORK/scrape" 2>&1)"
round=$(awk '$1 == "fleet_watch_rounds_total" {print $2}' "$WORK/scrape")
python3 - "$LOG" "$round" "$WORK/scrape" <<'PY' || fail "the scrape differs from the round's line"
import json, re, sys
log, n, scrape = sys.argv[1], int(sys.argv[2]), open(sys.argv[3]).read()
line = [l for l in map(json.loads, open(log)) if l.get("round") == n][0]
def value(name, **labels):
    want = ",".join('%s="%s"' % kv for kv in labels.items())
    key = name + ("{%s}" % want if want else "")
    for s in scrape.splitlines():
        if s.startswith(key + " "):
            return float(s.split()[-1])
    raise AssertionError("no sample " + key)
for s in line["serves"]:
    assert value("fleet_deployment_up", deployment=s["deployment"], node=s["node"]) == s["up"], s
    assert s["up"], s
results = {(c["deployment"], c["check"]): c for c in line["checks"]}
assert results[("a", "math")]["result"] == "pass" and results[("b", "math")]["result"] == "fail", results
for (d, check), c in results.items():
    node = c["node"]
    assert value("fleet_smoke_check_success", deployment=d, node=node, check=check) == (c["result"] == "pass")
    if "ttft_s" in c:
        assert value("fleet_smoke_check_ttft_seconds", deployment=d, node=node, check=check) == c["ttft_s"]
    if "tps" in c:
        assert value("fleet_smoke_check_decode_tokens_per_second", deployment=d, node=node, check=check) == c["tps"]
gpu = line["nodes"]["dgx1"]["gpus"][0]
assert value("fleet_node_gpu_memory_total_bytes", node="dgx1", gpu="0") == gpu["memory_total_bytes"] > 0
assert value("fleet_node_gpu_memory_free_bytes", node="dgx1", gpu="0") == gpu["memory_free_bytes"]
for node, f in line["nodes"].items():
    assert value("fleet_node_up", node=node) == f["up"] == True
assert value("fleet_state_serial") == line["state"]["serial"]
assert sum(value("fleet_plan_changes", kind=k) for k in ("add", "change", "replace", "destroy")) == line["drift"]["changes"] == 0
assert value("fleet_smoke_check_consecutive_failures", deployment="b", node="dgx2", check="math") == n
print("scrape of round", n, "matches its line")
PY

step "a real Prometheus scrapes it: fleet_deployment_up 1, then 0 within two rounds of a kill"
mkdir -p "$WORK/prom"
cat >"$WORK/prom/prometheus.yml" <<YAML
global: {scrape_interval: 1s, evaluation_interval: 1s}
scrape_configs:
  - job_name: fleet
    static_configs: [{targets: ["127.0.0.1:$PM"]}]
YAML
prometheus --config.file "$WORK/prom/prometheus.yml" --storage.tsdb.path "$WORK/prom/data" \
  --web.listen-address "127.0.0.1:$PP" >"$WORK/prom/log" 2>&1 &
BG_PIDS+=("$!")
q='fleet_deployment_up{deployment="a",node="dgx1"}'
for _ in $(seq 300); do [[ $(prom_query "$q") == 1 ]] && break; sleep 0.1; done
[[ $(prom_query "$q") == 1 ]] || fail "Prometheus does not see a up: '$(prom_query "$q")': $(tail -5 "$WORK/prom/log")"
ce dgx1 kill fleet-a >/dev/null
r0=$(rounds_scraped)
for _ in $(seq 300); do [[ $(prom_query "$q") == 0 ]] && break; sleep 0.1; done
[[ $(prom_query "$q") == 0 ]] || fail "Prometheus still sees a up after the kill"
r1=$(rounds_scraped)
((r1 - r0 <= 2)) || fail "a was seen down only $((r1 - r0)) rounds after the kill"
[[ $(prom_query 'fleet_smoke_check_success{deployment="b",check="math"}') == 0 ]] || fail "Prometheus does not see b's check fail"
kill -TERM "$WATCH"
wait "$WATCH" || fail "fleet watch exited $?: $(tail -5 "$WORK/watch.err")"
no_crash
echo "PASS metrics_test"
