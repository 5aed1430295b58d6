#!/usr/bin/env bash
# The demo: install what is needed, build, start a simulated fleet of five
# real sshd nodes on loopback, then `fleet plan` and `fleet apply` the
# examples/spark-lab manifests against it, and show that a second plan is
# empty. Run as root on Debian 12. `scripts/demo.sh stop` stops the fleet.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=examples/spark-lab
sim=$repo/.sim
if [[ ${1:-} == stop ]]; then
  tests/sim/fleet-sim stop "$sim" --purge
  exit 0
fi
bash scripts/install-deps.sh
bash scripts/build.sh >/dev/null
fleet=build/src/engine/fleet

tests/sim/fleet-sim stop "$sim" >/dev/null 2>&1 || true
rm -rf "$repo/.fleet"
echo "== starting 5 simulated nodes (sshd on 127.0.0.1:22101-22105) and a power switch server"
tests/sim/fleet-sim start "$sim" --nodes 5 --prefix fleetdemo- --base-port 22101 \
  --power --ha-port 28123
FLEET_DEMO_HA_TOKEN=$(cat "$sim/ha_token")
export FLEET_DEMO_HA_TOKEN
# The hot spare starts powered on, so the plan has something to switch off.

echo; echo "== fleet validate"; $fleet -C "$repo" validate
echo; echo "== fleet plan"; $fleet -C "$repo" plan
echo; echo "== fleet apply --auto-approve"; $fleet -C "$repo" apply --auto-approve
echo; echo "== fleet plan (again: nothing to do)"; $fleet -C "$repo" plan --detailed-exitcode
echo; echo "== fleet status"; $fleet -C "$repo" status
echo
echo "The simulated fleet is still running: try"
echo "  export FLEET_DEMO_HA_TOKEN=\$(cat $sim/ha_token)"
echo "  $fleet -C $repo destroy --auto-approve   # shift end: restore display RAM, power off"
echo "  $fleet -C $repo plan                     # what an apply would bring back"
echo "  scripts/demo.sh stop                      # stop the simulated nodes"
