#!/usr/bin/env bash
# A gateway with API keys in front of two serves, and requests of a 1M-token
# context (issues 42 and 44), on 3 loopback nodes:
# - long requests reach their serve: a 4 MB chat (~1M tokens), `model` after
#   `messages` as OpenAI's clients write it, for alpha and for beta; a 16 MB
#   one for alpha, whose deployment declares max_request: 16MiB; a 16 MB one
#   for beta (4 MiB, the default) gets a 413 naming the limit;
# - keys (gateways.lab.keys, a file outside the repo, mode 0600): no key and
#   an unknown key get an OpenAI-shaped 401, alice's key (alpha only) for beta
#   a 403, alice's for alpha and ops' (every model) for beta are answered;
#   /v1/models lists a key's models; /metrics/keys counts alice's requests;
# - fleet check through the gateway passes (it sends the operator's keys);
# - the keys are in no file fleet writes (state, saved plan, logs, the node's
#   config): only their SHA-256 digests are;
# - the gateway's memory with 64 held connections: idle, and each holding a
#   4 MB body (printed: the figure docs/manifest.md quotes).
# Registered once per engine (tests/meson.build).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/node_images.sh"
# Free ports: gateway_test (30001, 30002) may run beside this test.
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
PA=$(free_port)
PB=$(free_port)
# The nodes share the host's loopback: a fixed gateway port would meet
# another test's.
PGW=$(free_port)

for tool in "$CE" busybox haproxy; do
  command -v "$tool" >/dev/null || { echo "SKIP: $tool not installed"; exit 77; }
done
[[ $ENGINE != mixed ]] || { echo "SKIP: one engine per run (podman or docker)"; exit 77; }
need_fake_engine

SMOKE='[{"name": "math", "chat": "What is 127*89?", "expect": "11303", "timeout": "10s"}]'

step "3 nodes; the stand-in engine and HAProxy imported on dgx1"
start_fleet 3
GW=$(node_field dgx3 address)
ENG=$(import_image "$(engine_rootfs)" fleet/engine)
GWI=$(import_image "$(haproxy_rootfs)" fleet/haproxy --change "'ENV PATH=/usr/local/sbin:/usr/bin:/bin'")
mkdir -p "$REPO/recipes"
model_recipe alpha alpha
model_recipe beta beta
ALICE=sk-alice-$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')
OPS=sk-ops-$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')
KEYS=$WORK/lab-keys  # outside the repo ($REPO is $WORK/repo)
printf '# who may ask gateway lab\nalice %s alpha\nops %s *\n' "$ALICE" "$OPS" >"$KEYS"
chmod 600 "$KEYS"
mkrepo --image "eng={\"ref\": \"$ENG\", \"source\": \"node:dgx1\"}" \
  --image "gw={\"ref\": \"$GWI\", \"source\": \"node:dgx1\"}" \
  --deployment "a={\"recipe\": \"recipes/alpha.toml\", \"nodes\": [\"dgx1\"], \"image\": \"eng\", \"port\": ${PA}, \"max_request\": \"16MiB\", \"health\": {\"path\": \"/v1/models\", \"timeout\": \"30s\", \"request_timeout\": \"2m\", \"grace\": 3}, \"smoke\": $SMOKE}" \
  --deployment "b={\"recipe\": \"recipes/beta.toml\", \"nodes\": [\"dgx2\"], \"image\": \"eng\", \"port\": ${PB}, \"health\": {\"path\": \"/v1/models\", \"timeout\": \"30s\"}, \"smoke\": $SMOKE}"
printf 'gateways:\n  lab: {nodes: [dgx3], image: gw, port: %s, drain: 5s, keys: %s}\n' "$PGW" "$KEYS" >>"$REPO/fleet.yaml"

step "keys inside the repo, or readable by others, are refused"
cp "$KEYS" "$REPO/keys.txt"
sed -i "s|keys: $KEYS|keys: $REPO/keys.txt|" "$REPO/fleet.yaml"
expect_rc 1 validate
expect_out "names a file inside the manifests repo"
rm "$REPO/keys.txt"
sed -i "s|keys: $REPO/keys.txt|keys: $KEYS|" "$REPO/fleet.yaml"
chmod 644 "$KEYS"
expect_rc 1 plan
expect_out "chmod 600"
chmod 600 "$KEYS"

step "apply; converged; the gateway's checks follow each deployment's health"
expect_rc 0 plan -out "$WORK/saved.plan"
expect_rc 0 apply --auto-approve "$WORK/saved.plan"
assert_converged
cfg=$(on_node dgx3 'cat ~/.fleet/gateways/lab/haproxy.cfg')
grep -q 'timeout check 120s' <<<"$cfg" || fail "alpha's check does not wait its request_timeout: $cfg"
grep -q ":${PA} check inter 2s fall 3 rise 1" <<<"$cfg" || fail "alpha's check does not fall after its grace: $cfg"
grep -q 'tune.bufsize 17039360' <<<"$cfg" || fail "the buffer does not hold alpha's 16 MiB: $cfg"

call() {  # call KEY MODEL [BODY-FILE]: the status, then the body
  local auth=() body
  [[ -n $1 ]] && auth=(-H "Authorization: Bearer $1")
  if [[ -n ${3:-} ]]; then body=(--data-binary "@$3"); else
    body=(-d "{\"model\":\"$2\",\"messages\":[{\"role\":\"user\",\"content\":\"What is 127*89?\"}]}")
  fi
  curl -s -m 60 -o "$WORK/reply" -w '%{http_code}' "${auth[@]}" -H 'Content-Type: application/json' \
    "${body[@]}" "http://$GW:$PGW/v1/chat/completions"
  echo
  cat "$WORK/reply"
}
answered_by() {  # answered_by MODEL KEY [BODY-FILE]: a 200 from MODEL's serve
  local out
  out=$(call "$2" "$1" "${3:-}")
  [[ ${out%%$'\n'*} == 200 ]] || fail "a chat for $1 through the gateway: ${out:0:400}"
  python3 -c 'import json,sys; sys.exit(json.loads(sys.argv[1])["model"] != sys.argv[2])' "${out#*$'\n'}" "$1" ||
    fail "a chat for $1 was answered by another serve: ${out:0:400}"
}

step "keys: none or unknown -> 401, alice's for beta -> 403, the right key -> answered"
out=$(call "" alpha)
[[ ${out%%$'\n'*} == 401 && $out == *'"code":"invalid_api_key"'* && $out == *'"error":'* ]] || fail "no key: $out"
out=$(call sk-nobody-0123456789abcdef alpha)
[[ ${out%%$'\n'*} == 401 ]] || fail "an unknown key: $out"
out=$(call "$ALICE" beta)
[[ ${out%%$'\n'*} == 403 && $out == *'"code":"model_not_allowed"'* ]] || fail "alice's key for beta: $out"
answered_by alpha "$ALICE"
answered_by beta "$OPS"
answered_by alpha "$OPS"
models=$(curl -s -m 5 -H "Authorization: Bearer $ALICE" "http://$GW:$PGW/v1/models")
[[ $models == *'"id":"alpha"'* && $models != *beta* ]] || fail "alice's /v1/models: $models"
[[ $(curl -s -m 5 -o /dev/null -w '%{http_code}' "http://$GW:$PGW/v1/models") == 401 ]] || fail "/v1/models without a key"
[[ $(curl -s -m 5 "http://$GW:$PGW/health") == ok ]] || fail "the gateway's /health asks for a key"

step "fleet check through the gateway passes with keys on"
expect_rc 0 check
expect_out "a via lab"
expect_out "b via lab"

step "a 4 MB chat for alpha and for beta, a 16 MB one for alpha: routed by model (model after messages)"
big_body() {  # big_body FILE BYTES MODEL: a chat of that size, `model` last
  python3 - "$@" <<'PY'
import json, sys
path, size, model = sys.argv[1], int(sys.argv[2]), sys.argv[3]
head = '{"messages":[{"role":"system","content":"'
tail = '"},{"role":"user","content":"What is 127*89?"}],"model":' + json.dumps(model) + '}'
with open(path, "w") as f:
    f.write(head + "x" * (size - len(head) - len(tail)) + tail)
PY
}
big_body "$WORK/alpha4.json" 4000000 alpha
big_body "$WORK/beta4.json" 4000000 beta
big_body "$WORK/alpha16.json" 16000000 alpha
big_body "$WORK/beta16.json" 16000000 beta
answered_by alpha "$ALICE" "$WORK/alpha4.json"
answered_by beta "$OPS" "$WORK/beta4.json"
answered_by alpha "$ALICE" "$WORK/alpha16.json"
out=$(call "$OPS" beta "$WORK/beta16.json")
[[ ${out%%$'\n'*} == 413 && $out == *4194304* ]] || fail "16 MB for beta (max_request 4 MiB): ${out:0:400}"
out=$(call "" alpha "$WORK/alpha16.json")
[[ ${out%%$'\n'*} == 401 ]] || fail "16 MB without a key: ${out:0:300}"

step "per-key counters on /metrics/keys"
metrics=$(curl -s -m 5 "http://$GW:$PGW/metrics/keys")
grep -qE '^fleet_gateway_key_requests_total\{gateway="lab",key="alice"\} [4-9]' <<<"$metrics" ||
  fail "alice's requests are not counted: $metrics"
grep -qE '^fleet_gateway_key_requests_total\{gateway="lab",key="ops"\} [1-9]' <<<"$metrics" ||
  fail "ops' requests are not counted: $metrics"

step "the keys are in no file fleet writes: state, plan, logs, the node's config"
expect_rc 0 plan --json
for key in "$ALICE" "$OPS"; do
  ! grep -rlF -- "$key" "$REPO" "$WORK/out" "$WORK/err" "$WORK/saved.plan" "$(node_root dgx3)" \
    "$(on_node dgx3 'echo "$HOME"')/.fleet" 2>/dev/null || fail "a key is in a file fleet wrote"
done
digest=$(printf '%s' "$ALICE" | sha256sum | cut -d' ' -f1)
grep -q "$digest" <<<"$cfg" || fail "the node's config has not alice's digest"

step "the gateway's memory with 64 held connections (idle; each holding a 4 MB body)"
pid=$(ce dgx3 container inspect --format '{{.State.Pid}}' fleet-gw-lab)
pids=$(echo "$pid"; pgrep -P "$pid")
# shellcheck disable=SC2086 # one PID a word
python3 "$ROOT/tests/integration/gateway_memory.py" "$GW" "$PGW" 64 0 "$ALICE" $pids | tee "$WORK/mem-idle"
# shellcheck disable=SC2086
python3 "$ROOT/tests/integration/gateway_memory.py" "$GW" "$PGW" 64 4194304 "$ALICE" $pids | tee "$WORK/mem-4m"
held=$(sed -E 's/.*rss_held_kib=([0-9]+).*/\1/' "$WORK/mem-4m")
((held < 1024 * 1024)) || fail "64 connections holding 4 MB took ${held} KiB (over 1 GiB)"
answered_by alpha "$ALICE"
assert_converged
no_crash
echo PASS
