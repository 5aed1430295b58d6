#!/usr/bin/env bash
# package.sh: the release, for linux/amd64 and linux/arm64, in dist/:
#   dist/fleet-VERSION-linux-amd64    dist/fleet_VERSION_amd64.deb
#   dist/fleet-VERSION-linux-arm64    dist/fleet_VERSION_arm64.deb
# Each binary needs nothing but glibc (every other library static,
# src/release/meson.build) and carries fleet-probe for both architectures.
# arm64 is cross-compiled (scripts/cross/arm64.ini). Needs
# `bash scripts/install-deps.sh --release` (as root) and the Debian mirror
# (scripts/release-libs.sh). docs/install.md says what each file holds.
#   bash scripts/package.sh              # both architectures
#   bash scripts/package.sh amd64        # one
# Build folders: build-release/ (kept: a second run rebuilds what changed).
# FLEET_PACKAGE_WORK: another folder for them (tests/run-all.sh: release_test's
# build/tests/release, so that CI builds the arm64 fleet once);
# FLEET_PACKAGE_TESTS=true configures them with the unit tests (-Dtests=true,
# as release_test does; the same fleet, and only fleet is built here).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
archs=("$@")
((${#archs[@]})) || archs=(amd64 arm64)
work=${FLEET_PACKAGE_WORK:-$root/build-release}
dist=$root/dist
version=$(sed -n "s/^  version : '\([^']*\)',\$/\1/p" meson.build)
[[ -n $version ]] || { echo "package.sh: no version in meson.build" >&2; exit 1; }
jobs=${FLEET_PACKAGE_JOBS:-$(nproc)}
mkdir -p "$work" "$dist"
log=$work/package.log
: >"$log"
step() { printf '== %s\n' "$*"; }
run() { # run CMD...: its output to the log, shown when it fails
  if ! "$@" >>"$log" 2>&1; then
    tail -n 40 "$log" >&2
    echo "package.sh: failed: $* (the whole output: $log)" >&2
    exit 1
  fi
}
machine_of() { [[ $1 == amd64 ]] && echo x86_64 || echo aarch64; }
cross_prefix() { [[ $1 == amd64 ]] && echo "" || echo aarch64-linux-gnu-; }

# fleet-probe for each architecture, as a node would compile it (one source,
# C++17, libdl) plus static libstdc++ and libgcc: it runs on any glibc node.
probe_args=()
for arch in amd64 arm64; do
  m=$(machine_of "$arch")
  step "fleet-probe for linux/$arch ($m)"
  run "$(cross_prefix "$arch")g++" -O2 -std=c++17 "$root/src/probe/fleet_probe.cc" -ldl -pthread \
    -static-libstdc++ -static-libgcc -s -o "$work/fleet-probe-$m.new"
  # unchanged bytes keep their date: no relink of fleet
  if cmp -s "$work/fleet-probe-$m.new" "$work/fleet-probe-$m"; then
    rm "$work/fleet-probe-$m.new"
  else
    mv "$work/fleet-probe-$m.new" "$work/fleet-probe-$m"
  fi
  probe_args+=("$m=$work/fleet-probe-$m")
done
probes=$(IFS=,; echo "${probe_args[*]}")

for arch in "${archs[@]}"; do
  step "static archives Debian does not install side by side, linux/$arch (scripts/release-libs.sh)"
  run bash scripts/release-libs.sh "$arch" "$work/libs-$arch"
  bdir=$work/$arch
  opts=("-Dtests=${FLEET_PACKAGE_TESTS:-false}" -Dstatic_libs=true "-Dstatic_lib_dirs=$work/libs-$arch/lib"
    "-Dstatic_include_dirs=$work/libs-$arch/include" "-Dprobe_binaries=$probes"
    -Doptimization=2 -Ddebug=false -Dunity=on -Dunity_size=8)
  cross=()
  [[ $arch == amd64 ]] || cross=(--cross-file scripts/cross/arm64.ini)
  # Options are set once (remove $bdir to change them); a folder that
  # tests/integration/release_test.sh configured (-Dtests=true, otherwise the
  # same) builds the same fleet.
  if [[ ! -f $bdir/build.ninja ]]; then
    step "fleet for linux/$arch: configuring $bdir"
    run meson setup "$bdir" "${cross[@]}" "${opts[@]}"
  fi
  targets=(src/engine/fleet)
  step "fleet for linux/$arch: building (log: $log)"
  run ninja -C "$bdir" -j "$jobs" "${targets[@]}"
  out=$dist/fleet-$version-linux-$arch
  run "$(cross_prefix "$arch")strip" -R .comment -o "$out" "$bdir/src/engine/fleet"
  step "wrote $out"
done

for arch in "${archs[@]}"; do
  step "Debian package for $arch (scripts/make-deb.sh)"
  run bash scripts/make-deb.sh "$arch" "$version" "$dist/fleet-$version-linux-$arch" "$dist"
  step "wrote $dist/fleet_${version}_$arch.deb"
done
