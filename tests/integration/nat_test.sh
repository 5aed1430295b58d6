#!/usr/bin/env bash
# The controller behind NAT (a laptop on a VPN, a lab behind a router):
# fleet-sim --nat rewrites the source port of every connection the
# controller opens to the nodes' LAN (MASQUERADE --random-fully), so a node
# never sees the controller's own ports, as the lab's nodes do not.
# - apply, `fleet check` and 20 rounds of `watch --heal` pass identity (by
#   the address the node sees the controller at) and heal nothing;
# - a client address pointed at the other node's serve (DNAT on the
#   controller) still fails identity, naming the serve it did not reach.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/registry.sh"

PORT=30200
DNAT=()
dnat_cleanup() { [[ ${#DNAT[@]} == 0 ]] || iptables -t nat -D OUTPUT "${DNAT[@]}" 2>/dev/null || true; }
trap 'dnat_cleanup; registry_cleanup; cleanup' EXIT

step "2 nodes on a LAN the controller reaches through NAT"
start_fleet 2 --net lan+fabric --nat
python3 -c 'import json,sys; sys.exit(0 if json.load(open(sys.argv[1]))["nat"] else 1)' "$SIMDIR/sim.json" ||
  fail "sim.json does not say nat"
A1=$(node_field dgx1 address)
A2=$(node_field dgx2 address)

step "the stand-in engine imported on both nodes (no registry is reachable from them)"
FAKE_ENGINE=${FLEET_FAKE_ENGINE:-$ROOT/build/tests/sim/fake_engine/fake-engine}
D=sha256:$(printf 'fleet nat test engine' | sha256sum | cut -d' ' -f1)
rootfs=$WORK/rootfs
mkdir -p "$rootfs/bin"
cp "$BUSYBOX" "$rootfs/bin/busybox"
cp "$FAKE_ENGINE" "$rootfs/bin/fake-engine"
ln -s busybox "$rootfs/bin/sh"
quiet=
[[ $CE == podman ]] && quiet=-q # docker import has no -q
for n in dgx1 dgx2; do
  tar -C "$rootfs" -c . | ce "$n" "import $quiet - localhost/fleet/engine:sha256-${D#sha256:} >/dev/null" ||
    fail "import on $n"
done
mkdir -p "$REPO/recipes"
printf '%s\n' 'model = ""' \
  'args = ["fake-engine", "--port", "{port}", "--served-model-name", "qwen38"]' 'memory_limit = "256m"' \
  '[env]' 'FAKE_ENGINE_TOKEN_MS = "2"' >"$REPO/recipes/e.toml"
SMOKE='[{"name": "math", "chat": "What is 127*89? Reply with the number only.", "expect": "11303", "timeout": "10s"}]'
dep() { echo "$1={\"recipe\": \"recipes/e.toml\", \"nodes\": [\"$2\"], \"image\": \"eng\", \"port\": $PORT, \"health\": {\"path\": \"/v1/models\", \"timeout\": \"30s\"}, \"smoke\": $SMOKE}"; }
mkrepo --image "eng={\"ref\": \"localhost/fleet/engine@$D\", \"source\": \"node:dgx1\"}" \
  --deployment "$(dep a dgx1)" --deployment "$(dep b dgx2)"

step "apply: identity passes behind NAT"
expect_rc 0 apply --auto-approve
expect_out "identity"
assert_converged

step "fleet check: every check passes"
expect_rc 0 check --json
python3 - "$WORK/out" <<'PY' || fail "fleet check: $(cat "$WORK/out")"
import json, sys
r = json.load(open(sys.argv[1]))
ids = [c for c in r["results"] if c["check"] == "identity"]
assert r["passed"] and len(ids) == 2, r
PY

step "20 rounds of watch --heal: no heal, identity matched by the NAT'd address"
"$FLEET" -C "$REPO" --no-color watch --heal --every 1s --rounds 20 --log "$WORK/watch.jsonl" \
  >"$WORK/watch.out" 2>&1 </dev/null || fail "watch: $(tail -5 "$WORK/watch.out")"
python3 - "$WORK/watch.jsonl" <<'PY' || fail "the watch: $(tail -3 "$WORK/watch.jsonl")"
import json, sys
rounds = heals = nat = 0
for line in open(sys.argv[1]):
    e = json.loads(line)
    if e.get("event") in ("heal", "heal_wait", "quarantine"):
        heals += 1
    if "round" not in e:
        continue
    rounds += 1
    for c in e["checks"]:
        assert c["result"] == "pass", (e["round"], c)
        nat += c["check"] == "identity" and "rewritten on the way (NAT)" in c.get("detail", "")
assert rounds == 20 and heals == 0, (rounds, heals)
assert nat == 40, nat  # both serves, every round: the source ports were rewritten
PY

step "a client address pointed at the other node's serve fails identity"
DNAT=(-d "$A1" -p tcp --dport "$PORT" -j DNAT --to-destination "$A2:$PORT")
iptables -t nat -A OUTPUT "${DNAT[@]}" || fail "iptables"
expect_rc 1 check deployment.a@dgx1
expect_out "does not reach"
dnat_cleanup
DNAT=()
expect_rc 0 check deployment.a@dgx1
no_crash
echo "PASS nat_test"
