#!/usr/bin/env bash
# Builds fleet and runs every test: unit tests and the integration tests
# against real sshd nodes on loopback. Run as root on Debian 12.
#   bash tests/run-all.sh            # everything
#   bash tests/run-all.sh TEST...    # those meson tests only
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh
# Integration tests start their own simulated fleets; two at a time is what
# two cores carry without timeouts.
jobs=(--print-errorlogs --num-processes "${FLEET_TEST_JOBS:-2}")
if (($#)); then
  exec meson test -C build "${jobs[@]}" "$@"
fi
# fuzz_replay_test (suite fuzz) runs beside the others, not after them: most
# of it is the fuzz build, which fuzz/replay.sh runs at nice 19 on the cores
# the integration tests leave idle while they wait on sshd and containers.
# Inside meson it would hold a slot, and every test meson runs alone would
# wait for it (6.5 of 21 minutes of tests when it ran last, alone).
fuzz_log="$(mktemp)"
trap 'rm -f "$fuzz_log"' EXIT
FUZZ_BUILD_DIR="$PWD/build/fuzz/build-fuzz" bash fuzz/replay.sh >"$fuzz_log" 2>&1 &
fuzz_pid=$!
started=$SECONDS
rc=0
meson test -C build "${jobs[@]}" --no-suite fuzz || rc=$?
fuzz_rc=0
wait "$fuzz_pid" || fuzz_rc=$?
case $fuzz_rc in
  0) verdict=OK ;;
  77) verdict=SKIP ;;
  *) verdict=FAIL rc=1 ;;
esac
echo "fuzz_replay_test (fuzz/replay.sh beside the tests above): $verdict (exit $fuzz_rc, done $((SECONDS - started)) s after they started)"
[[ $verdict == OK ]] || cat "$fuzz_log"
exit "$rc"
