#!/usr/bin/env bash
# Builds fleet and runs every test: unit tests and the integration tests
# against real sshd nodes on loopback. Run as root on Debian 12.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh
# Integration tests start their own simulated fleets; two at a time is what
# two cores carry without timeouts.
meson test -C build --print-errorlogs --num-processes "${FLEET_TEST_JOBS:-2}" "$@"
