#!/usr/bin/env bash
# The example manifests repos validate (no network): examples/dgx-spark-lab
# (the log's lab: five docker nodes, the NAS store, pinned images, the hot
# spare off) as committed, and with each of the night's other serves swapped
# in for the EXL3 pair (MiMo Flash 2x, Aiden DSV4.1 4x), so every recipe of
# the example is linted.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
FLEET=${FLEET:-$ROOT/build/src/engine/fleet}
WORK=$(mktemp -d /var/tmp/fleet-examples.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
fail() { echo "FAIL: $*" >&2; cat "$WORK/out" >&2 2>/dev/null; exit 1; }

LAB=$ROOT/examples/dgx-spark-lab
"$FLEET" -C "$LAB" --no-color validate >"$WORK/out" 2>&1 || fail "dgx-spark-lab does not validate"
grep -c "container_cli: docker" "$LAB/fleet.yaml" | grep -qx 5 || fail "not five docker nodes"
grep -q "state: off" "$LAB/fleet.yaml" || fail "the hot spare is not off"

# swap DEPLOYMENT-YAML [spare-on]: the lab with the exl3-2x deployment
# replaced (and the hot spare dgx3 switched on for a serve that needs it)
swap() {
  rm -rf "$WORK/lab"
  cp -r "$LAB" "$WORK/lab"
  python3 - "$WORK/lab/fleet.yaml" "$1" "${2-}" <<'PY'
import sys
p, new, spare_on = sys.argv[1], sys.argv[2], sys.argv[3]
s = open(p).read()
if spare_on:
    s = s.replace("switch.dgx3, state: off", "switch.dgx3, state: on")
at = s.index("  exl3-2x:\n")
open(p, "w").write(s[:at] + new + "\n")
PY
  "$FLEET" -C "$WORK/lab" --no-color validate >"$WORK/out" 2>&1
}
swap '  mimo26-2x: {recipe: recipes/mimo26-flash-rl-2x.toml, nodes: [dgx1, dgx2], image: mimo26, model: mimo26, port: 30000, health: {path: /v1/models, timeout: 30m}}' ||
  fail "the lab with MiMo Flash 2x does not validate"
swap '  aiden-4x: {recipe: recipes/dsv41-flash-4x-sglang-aiden16.toml, nodes: [dgx1, dgx2, dgx3, dgx4], image: aiden16, model: dsv41, port: 30000, health: {path: /health, timeout: 45m}}' spare-on ||
  fail "the lab with Aiden 4x does not validate"
# and the one-serve-per-node rule holds in it: the pair plus Aiden is refused
swap '  exl3-2x: {recipe: recipes/dsv41-flash-exl3-2x.toml, nodes: [dgx1, dgx2], image: exl3, model: dsv41-exl3, port: 30000}
  aiden-4x: {recipe: recipes/dsv41-flash-4x-sglang-aiden16.toml, nodes: [dgx1, dgx2, dgx3, dgx4], image: aiden16, model: dsv41, port: 30001}' spare-on &&
  fail "two serves on dgx1 validated"
grep -q "both run on node 'dgx1'" "$WORK/out" || fail "the refusal does not name the node"
echo PASS
