#!/usr/bin/env bash
# Installs what fleet needs to build and test on Debian 12 (run as root).
set -euo pipefail
packages=(
  build-essential g++ meson ninja-build pkg-config
  libyaml-cpp-dev libtomlplusplus-dev nlohmann-json3-dev libssh-dev libssl-dev
  libspdlog-dev libfmt-dev libcurl4-openssl-dev libcli11-dev libgtest-dev libgmock-dev libpq-dev
  # fleet watch --metrics-listen (HTTP server)
  libcpp-httplib-dev
  openssh-server openssh-client python3 iproute2 nftables util-linux procps passwd
  # images: rootless podman on the simulated nodes, a local registry, test images
  podman runc uidmap docker-registry busybox-static
  # docker on the simulated nodes (fleet-sim start --engine docker): dockerd 20.10
  docker.io
  # smoke/watch tests: a swapped client address (iptables), the report in a real browser
  iptables chromium
  # the postgres state backend: tests start their own server (tests/pg/pg-sim)
  postgresql postgresql-client
  # fleet(1): the man page generated from --help, rendered in man_page_test
  help2man man-db
  # metrics: promtool checks the scrape and the example alert rules; a real
  # Prometheus scrapes a watch in metrics_test
  prometheus
  # gateways: HAProxy checks the config fleet writes (gateway_config_test) and
  # its binary makes the test image gateway_test runs
  haproxy
  # scripts/check-code-shape.sh (the code_shape_test)
  universal-ctags
  # tests/faults/concurrent.sh: the losing command's file calls, traced
  strace
  # fuzzing (fuzz/, bench/fuzz.sh, fuzz_replay_test): clang with libFuzzer, ASan, UBSan
  clang-16 libclang-rt-16-dev libfuzzer-16-dev
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if ((${#missing[@]})); then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  # With recommends: the same podman set-up (fuse-overlayfs, slirp4netns, …)
  # the tests were run with.
  apt-get install -y -qq "${missing[@]}"
fi
