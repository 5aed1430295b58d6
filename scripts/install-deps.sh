#!/usr/bin/env bash
# Installs what fleet needs on Debian 12 (run as root):
#   bash scripts/install-deps.sh                # everything: the test suite (CI),
#                                               #   the release builds' cross tools
#                                               #   (release_test) included
#   bash scripts/install-deps.sh --build-only   # fleet and fleet-probe alone:
#                                               #   meson setup build -Dtests=false
#   bash scripts/install-deps.sh --demo         # what scripts/demo.sh runs
#   bash scripts/install-deps.sh --release      # scripts/package.sh: static
#                                               #   amd64 + arm64 builds, .deb,
#                                               #   and deb_install_test's tools
#   bash scripts/install-deps.sh --all          # the suite and the release
# apt's output goes to a log file, named when it fails (FLEET_APT_LOG, default
# /tmp/fleet-install-deps.log); one line says what is installed.
set -euo pipefail
# fleet and fleet-probe (-Dtests=false): compiler, meson, the libraries fleet
# links, help2man for fleet(1).
build=(
  build-essential g++ meson ninja-build pkg-config python3
  libyaml-cpp-dev libtomlplusplus-dev nlohmann-json3-dev libssh-dev libssl-dev
  libspdlog-dev libfmt-dev libcurl4-openssl-dev libcli11-dev libpq-dev
  # fleet watch --metrics-listen (HTTP server)
  libcpp-httplib-dev
  # fleet(1): the man page generated from --help
  help2man
)
# The unit tests (scripts/build.sh builds them with fleet).
unit=(libgtest-dev libgmock-dev)
# What the demo runs beside fleet: simulated nodes (real sshd in namespaces),
# rootless podman, a local registry, the demo's images (busybox, HAProxy).
demo=(
  openssh-server openssh-client iproute2 nftables util-linux procps passwd curl
  podman runc uidmap docker-registry busybox-static
  # gateways: HAProxy checks the config fleet writes and makes the gateway image
  haproxy
)
# The rest of the test suite.
suite=(
  # docker on the simulated nodes (fleet-sim start --engine docker): dockerd 20.10
  docker.io
  # smoke/watch tests: a swapped client address (iptables), the report in a real browser
  iptables chromium
  # the postgres state backend: tests start their own server (tests/pg/pg-sim)
  postgresql postgresql-client
  # man_page_test renders fleet(1)
  man-db
  # metrics: promtool checks the scrape and the example alert rules; a real
  # Prometheus scrapes a watch in metrics_test
  prometheus
  # scripts/check-code-shape.sh (the code_shape_test)
  universal-ctags
  # tests/faults/concurrent.sh: the losing command's file calls, traced
  strace
  # fuzzing (fuzz/, bench/fuzz.sh, fuzz_replay_test): clang with libFuzzer, ASan, UBSan
  clang-16 libclang-rt-16-dev libfuzzer-16-dev
)
# The release (scripts/package.sh, tests/integration/release_test.sh): the
# static archives of what libcurl links, the arm64 cross compiler and
# libraries (Debian's multiarch), qemu-user to run arm64 binaries, the .deb
# tools. libpq-dev, libyaml-cpp-dev and postgresql-server-dev-15 of arm64
# are not co-installable: scripts/release-libs.sh downloads their archives.
static_libs=(libnghttp2-dev libidn2-dev libpsl-dev libssh2-1-dev libzstd-dev libbrotli-dev
  zlib1g-dev libunistring-dev)
release=(
  crossbuild-essential-arm64 qemu-user-static dpkg-dev file
  # the headers of what src/release/absent_libs.cc stands in for
  libkrb5-dev librtmp-dev
  "${static_libs[@]}"
  "${static_libs[@]/%/:arm64}"
  libssh-dev:arm64 libssl-dev:arm64 libcurl4-openssl-dev:arm64 libgtest-dev:arm64
  libgmock-dev:arm64
)
# deb_install_test: a debootstrapped Debian 13 and lintian (not in CI: see
# tests/run-all.sh).
deb_test=(lintian debootstrap)

case ${1:-} in
  --build-only) what="the build"; packages=("${build[@]}") ;;
  --demo) what="the demo"; packages=("${build[@]}" "${unit[@]}" "${demo[@]}") ;;
  --release) what="the release build"
    packages=("${build[@]}" "${release[@]}" "${deb_test[@]}") ;;
  # With the release's cross tools: CI builds the release binaries of both
  # platforms and runs release_test on every submission (tests/run-all.sh),
  # in this same apt run (one update, one install).
  "") what="the test suite"
    packages=("${build[@]}" "${unit[@]}" "${demo[@]}" "${suite[@]}" "${release[@]}") ;;
  --all) what="the test suite and the release build"
    packages=("${build[@]}" "${unit[@]}" "${demo[@]}" "${suite[@]}" "${release[@]}"
      "${deb_test[@]}") ;;
  *) echo "usage: install-deps.sh [--build-only | --demo | --release | --all]" >&2; exit 2 ;;
esac
# A second real Hub client for hub_test (tests/sim/hf-js): npm's
# @huggingface/hub at the version its package-lock.json pins, from the npm
# registry. Node.js and npm from Debian where the machine has none (a
# machine with NodeSource's nodejs has npm inside it, and Debian's npm
# would conflict with it).
install_hub_js() {
  local dir
  dir="$(cd "$(dirname "$0")/.." && pwd)/tests/sim/hf-js"
  [[ -f $dir/node_modules/@huggingface/hub/package.json ]] && return 0
  echo "installing npm's @huggingface/hub for the tests (npm's output: $log)"
  (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error) >>"$log" 2>&1 || {
    tail -n 20 "$log" >&2
    echo "install-deps.sh: npm ci in $dir failed (the whole output: $log)" >&2
    exit 1
  }
}
case ${1:-} in
  "" | --all) command -v npm >/dev/null || packages+=(nodejs npm) ;;
esac
log=${FLEET_APT_LOG:-/tmp/fleet-install-deps.log}
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if ((${#missing[@]} == 0)); then
  case ${1:-} in "" | --all) install_hub_js ;; esac
  exit 0
fi
echo "installing ${#missing[@]} packages for $what (apt's output: $log)"
export DEBIAN_FRONTEND=noninteractive
{
  # arm64 packages beside the amd64 ones (multiarch)
  if [[ " ${missing[*]}" == *:arm64* ]] && ! dpkg --print-foreign-architectures | grep -qx arm64; then
    dpkg --add-architecture arm64
  fi
  apt-get update -qq
  # With recommends: the same podman set-up (fuse-overlayfs, slirp4netns, …)
  # the tests were run with.
  apt-get install -y -qq "${missing[@]}"
} >>"$log" 2>&1 || {
  tail -n 20 "$log" >&2
  echo "install-deps.sh: apt-get failed installing ${missing[*]} (the whole output: $log)" >&2
  exit 1
}
case ${1:-} in "" | --all) install_hub_js ;; esac
