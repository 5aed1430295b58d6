#!/usr/bin/env bash
# The promote gate (issue #47) on one simulated fleet of three nodes on a LAN
# (fleet-sim --net lan+fabric: an address each, so the new serve can run
# beside the old one on the same port): deployment lab on dgx1 behind
# gateway lab on dgx2, dgx3 free with every engine image staged (the
# images' nodes: [dgx3]). Each image of the stand-in engine carries its own
# speed in its environment (FAKE_ENGINE_TOKEN_MS, as llama-benchy would see
# a faster or slower build of the same engine), at the lab's ratios of
# bench_test: a prefill of 2000 t/s and a 600 ms fresh-context penalty.
# promote: {profile: gate, max_regression: 10%, min_quality: last}.
#   1. v1 (20 t/s) -> fast (25 t/s): no good run yet, so the gate benches
#      v1 first (the baseline, marked good), then fast beside it on dgx3:
#      promoted, marked good, dgx1 runs fast, dgx3 nothing;
#   2. fast -> slow (17.5 t/s, 30% slower) under a client loop through the
#      gateway: refused with the comparison table, the route and dgx1
#      unchanged, no request failed, dgx3 empty; the spec held;
#   3. fast -> garble (25 t/s, every 10th answer garbage): refused on the
#      quality set;
#   4. the images no longer on dgx3, so no node is free: slow again
#      (--retry-gate), in place with the old container kept aside: refused,
#      the old container put back and serving;
#   5. fleet events and fleet report --bench show the history;
# after each apply the plan is empty and a second apply does nothing.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/node_images.sh"
source "$(dirname "$0")/gateway_loop.sh"

for tool in ip tc nsenter "$CE" busybox haproxy; do
  command -v "$tool" >/dev/null || { echo "SKIP: $tool not installed"; exit 77; }
done
[[ $ENGINE != mixed ]] || { echo "SKIP: one engine per run (podman or docker)"; exit 77; }
need_fake_engine

# engine_image NAME TOKEN_MS [MORE-ENV]: the stand-in engine, its speed in
# the image's environment (a file of its own makes each image another).
engine_image() {
  local root=$WORK/engine-$1 env
  mkdir -p "$root/bin" "$root/etc"
  cp "$(command -v busybox)" "$root/bin/busybox"
  cp "$FAKE_ENGINE" "$root/bin/fake-engine"
  ln -s busybox "$root/bin/sh"
  echo "$1" >"$root/etc/fleet-test-image"
  env="--change 'ENV FAKE_ENGINE_TOKEN_MS=$2' --change 'ENV FAKE_ENGINE_PREFILL_TPS=2000'"
  env+=" --change 'ENV FAKE_ENGINE_FRESH_DELAY_MS=600'"
  [[ -z ${3:-} ]] || env+=" --change 'ENV $3'"
  import_image "$root" "fleet/engine-$1" "$env"
}

step "3 nodes on a LAN; four builds of the stand-in engine and HAProxy on dgx1"
start_fleet 3 --net lan+fabric
GW=$(node_field dgx2 address)
# (read by write_repo through ${!name}.)
# shellcheck disable=SC2034
V1=$(engine_image v1 50)
FAST=$(engine_image fast 40)
# shellcheck disable=SC2034
SLOW=$(engine_image slow 57)
# shellcheck disable=SC2034
GARBLE=$(engine_image garble 40 FAKE_ENGINE_GARBLE_EVERY=10)
GWI=$(import_image "$(haproxy_rootfs)" fleet/haproxy "--change 'ENV PATH=/usr/local/sbin:/usr/bin:/bin'")
mkdir -p "$REPO/recipes" "$REPO/quality"
cat >"$REPO/recipes/lab.toml" <<'TOML'
model = ""
args = ["fake-engine", "--port", "{port}", "--served-model-name", "qwen38"]
memory_limit = "256m"
TOML
cat >"$REPO/quality/lab.jsonl" <<'JSONL'
{"name": "mult", "prompt": "What is 12*12? Reply with the number only.", "expected": "144"}
{"prompt": "What is 300+33? Reply with the number only.", "expected": "333"}
{"prompt": "What is 91-17? Reply with the number only.", "expected": "74"}
{"prompt": "What is 84/4? Reply with the number only.", "expected": "21"}
JSONL
# The gate profile's cells are fresh ones only: what the steps below judge
# is the decode (d0/c1/fresh's tg) and the quality set, and d1024 keeps the
# lab's prefill in the compared pp t/s. The cached cells (a warm-up and two
# requests each, ~5 s of each of the five gated runs, in a test that runs
# alone) are compared by the same CompareBench in bench_test's repeat run.
write_repo() {  # write_repo IMAGE [SPARE]: lab on dgx1 runs IMAGE; the images on SPARE (dgx3)
  local img=() name spare=', "nodes": ["dgx3"]'
  [[ ${2-dgx3} == dgx3 ]] || spare=""
  for name in v1 fast slow garble; do
    local ref_var=${name^^}
    img+=(--image "$name={\"ref\": \"${!ref_var}\", \"source\": \"node:dgx1\"$spare}")
  done
  mkrepo "${img[@]}" --image "gw={\"ref\": \"$GWI\", \"source\": \"node:dgx1\"}" \
    --deployment "lab={\"recipe\": \"recipes/lab.toml\", \"nodes\": [\"dgx1\"], \"image\": \"$1\", \"port\": 30001, \"health\": {\"path\": \"/v1/models\", \"timeout\": \"30s\"}, \"promote\": {\"profile\": \"gate\", \"max_regression\": \"10%\", \"min_quality\": \"last\"}}"
  cat >>"$REPO/fleet.yaml" <<'YAML'
gateways:
  lab: {nodes: [dgx2], image: gw, port: 8000, drain: 10s}
bench:
  profiles:
    gate: {depths: [0, 1024], concurrency: [1], contexts: [fresh], requests: 2, max_tokens: 16}
  quality: quality/lab.jsonl
YAML
}
state_image() {  # the image the state records for lab@dgx1
  python3 -c 'import json,sys; r=[x for x in json.load(open(sys.argv[1]))["resources"] if x["address"]=="deployment.lab@dgx1"]; print(r[0]["attributes"]["image"])' "$(state_file)"
}
no_candidate() {
  ! ce dgx3 container inspect fleet-lab >/dev/null 2>&1 || fail "the gate's candidate is still on dgx3"
}
route_on_dgx1() {
  on_node dgx2 'cat ~/.fleet/gateways/lab/haproxy.cfg' >"$WORK/haproxy.cfg"
  grep -q "$(node_field dgx1 address):30001" "$WORK/haproxy.cfg" ||
    fail "the gateway does not route to dgx1: $(grep -n 30001 "$WORK/haproxy.cfg")"
  ! grep -q "$(node_field dgx3 address):30001" "$WORK/haproxy.cfg" || fail "the gateway routes to dgx3"
}

write_repo v1
expect_rc 0 apply --auto-approve
assert_converged
route_on_dgx1

step "v1 -> fast: gated beside on dgx3; no good run yet, so v1 is benched first"
write_repo fast
expect_rc 2 plan --detailed-exitcode
expect_out "gated: benched beside the old serve on dgx3 first"
expect_rc 2 plan --detailed-exitcode --json
python3 -c 'import json,sys; c=[c for c in json.load(open(sys.argv[1]))["changes"] if c["address"]=="deployment.lab@dgx1"][0]; g=c["gate"]; assert g["candidate"]=="dgx3" and g["profile"]=="gate" and g["max_regression_pct"]==10 and g["min_quality"]=="last", g' "$WORK/out" ||
  fail "the plan's gate: $(cat "$WORK/out")"
expect_rc 0 apply --auto-approve
cp "$WORK/out" "$WORK/promote.out"
expect_out "benching the serving spec first (the baseline)"
expect_out "PROMOTE: "
expect_out "gate passed: "
expect_out "route qwen38 to the candidate on dgx3"
[[ $(state_image) == "$FAST" ]] || fail "dgx1 does not run fast: $(state_image)"
no_candidate
route_on_dgx1
sed -n '/Compared with/,/PROMOTE/p' "$WORK/promote.out"
assert_converged

step "fast -> slow (decode 30% slower) under a client loop: refused, route and serve unchanged"
write_repo slow
start_loop qwen38
expect_rc 1 apply --auto-approve
cp "$WORK/out" "$WORK/slow.out"
stop_loop 10
expect_out "the gate refused the new spec"
expect_out "REFUSED: "
# The comparison once (the step's progress), not again in the error and
# again in apply's summary of what failed.
[[ $(grep -c "REFUSED: " "$WORK/slow.out") == 1 ]] || fail "the verdict is shown more than once: $(cat "$WORK/slow.out")"
grep -qE '^deployment\.lab@dgx1: +! d0/c1/fresh +tg t/s ' "$WORK/slow.out" || fail "no flagged tg cell: $(cat "$WORK/slow.out")"
grep -qE 'tg t/s .*\(-[23][0-9]\.[0-9]%\), beyond 10\.0%' "$WORK/slow.out" || fail "no tg reason: $(cat "$WORK/slow.out")"
[[ $(state_image) == "$FAST" ]] || fail "dgx1 does not run fast any more: $(state_image)"
[[ $(ce dgx1 container inspect --format '{{.State.Status}}' fleet-lab) == running ]] || fail "the old serve stopped"
no_candidate
route_on_dgx1
sed -n '/Compared with/,/^ *- /p' "$WORK/slow.out"
expect_rc 0 plan --detailed-exitcode
expect_out "held: the gate refused this spec"
assert_converged

step "fast -> garble (every 10th answer garbage): refused on the quality set"
write_repo garble
expect_rc 1 apply --auto-approve
cp "$WORK/out" "$WORK/garble.out"
grep -qE 'quality [0-9]+/[0-9]+ is below the last good run.s [0-9]+/[0-9]+' "$WORK/garble.out" ||
  fail "no quality refusal: $(cat "$WORK/garble.out")"
[[ $(state_image) == "$FAST" ]] || fail "dgx1 does not run fast any more: $(state_image)"
no_candidate
route_on_dgx1
assert_converged

step "no free node (the images no longer on dgx3): slow again, in place, put back when refused"
write_repo slow ""
expect_rc 2 plan --detailed-exitcode
expect_out "held: the gate refused this spec"
expect_rc 2 plan --detailed-exitcode --retry-gate
expect_out "gated: in place, the old container kept for the rollback"
expect_rc 1 apply --auto-approve --retry-gate
cp "$WORK/out" "$WORK/inplace.out"
expect_out "gate: no free node: the new spec starts in place, the old container kept"
expect_out "the old container is back and serving"
[[ $(state_image) == "$FAST" ]] || fail "dgx1 does not run fast any more: $(state_image)"
[[ $(ce dgx1 container inspect --format '{{.State.Status}}' fleet-lab) == running ]] || fail "the old serve is not back"
! ce dgx1 container inspect fleet-lab-previous >/dev/null 2>&1 || fail "fleet-lab-previous is left on dgx1"
[[ $(curl -s -m 10 "http://$GW:8000/v1/chat/completions" -d '{"model":"qwen38","messages":[{"role":"user","content":"What is 127*89?"}]}') == *11303* ]] ||
  fail "the old serve does not answer through the gateway"
assert_converged

step "the gate's history: fleet events, fleet report --bench"
expect_rc 0 events
grep -qE ' gate +deployment\.lab@dgx1 +promoted ' "$WORK/out" || fail "no promoted gate event: $(cat "$WORK/out")"
[[ $(grep -cE ' gate +deployment\.lab@dgx1 +refused ' "$WORK/out") == 3 ]] || fail "not three refusals: $(cat "$WORK/out")"
grep -qE ' bench_good +deployment\.lab@dgx3 +marked good +[^ ]+ \(gate passed\)' "$WORK/out" || fail "the promoted run is not marked good: $(cat "$WORK/out")"
expect_rc 0 report --bench --deployment lab
cat "$WORK/out"
grep -qE '^  \* [^ ]+ +gate +gate passed ' "$WORK/out" || fail "the report does not star the promoted run: $(cat "$WORK/out")"
[[ $(grep -c 'gate refused' "$WORK/out") == 3 ]] || fail "the report lacks the refused runs: $(cat "$WORK/out")"
[[ -s $(state_file).bench ]] || fail "no bench history beside the state"
no_crash
echo PASS
