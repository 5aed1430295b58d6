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
release_log="$(mktemp)"
trap 'rm -f "$fuzz_log" "$release_log"' EXIT
FUZZ_BUILD_DIR="$PWD/build/fuzz/build-fuzz" bash fuzz/replay.sh >"$fuzz_log" 2>&1 &
fuzz_pid=$!
# The release (issue 48) beside them too, for the same reason: fleet for
# linux/amd64 and linux/arm64 as scripts/package.sh makes them (static,
# both fleet-probe builds inside) and their .debs, built at nice 19 in an
# autogroup of their own as the fuzz build is (with autogroups, nice alone
# orders only inside a session), into release_test's build folder: the arm64
# fleet is built once, for both. Then release_test (the suite release) at the
# tests' priority: qemu-user, an aarch64 node, timeouts that must not fire.
# deb_install_test is not run here: its debootstrap of Debian 13 is 2.5 min
# of downloads from deb.debian.org and its install 4 min more, on every
# submission, for packages that change when scripts/make-deb.sh does.
release() {
  local dir=$PWD/build/tests/release package_rc=0
  setsid -w bash -c 'echo 19 >/proc/self/autogroup 2>/dev/null; exec nice -n 19 "$@"' release-build \
    env FLEET_PACKAGE_WORK="$dir" FLEET_PACKAGE_TESTS=true bash scripts/package.sh arm64 amd64 ||
    package_rc=$?
  echo "package.sh: exit $package_rc"
  meson test -C build --no-rebuild --print-errorlogs --logbase release-testlog release_test
}
release >"$release_log" 2>&1 &
release_pid=$!
started=$SECONDS
rc=0
meson test -C build "${jobs[@]}" --no-suite fuzz --no-suite release || rc=$?
fuzz_rc=0
wait "$fuzz_pid" || fuzz_rc=$?
case $fuzz_rc in
  0) verdict=OK ;;
  77) verdict=SKIP ;;
  *) verdict=FAIL rc=1 ;;
esac
echo "fuzz_replay_test (fuzz/replay.sh beside the tests above): $verdict (exit $fuzz_rc, done $((SECONDS - started)) s after they started)"
[[ $verdict == OK ]] || cat "$fuzz_log"
release_rc=0
wait "$release_pid" || release_rc=$?
# release_test skips (77: meson says SKIP and exits 0) without the Debian
# mirror, and package.sh then fails on the same download.
if grep -q ' release_test  *SKIP' "$release_log"; then
  verdict=SKIP
elif ((release_rc == 0)) && grep -q '^package.sh: exit 0$' "$release_log"; then
  verdict=OK
else
  verdict=FAIL rc=1
fi
echo "release (scripts/package.sh and release_test beside the tests above): $verdict (done $((SECONDS - started)) s after they started)"
[[ $verdict == OK ]] || cat "$release_log"
exit "$rc"
