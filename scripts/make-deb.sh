#!/usr/bin/env bash
# make-deb.sh ARCH VERSION BINARY OUTDIR: OUTDIR/fleet_VERSION_ARCH.deb of the
# static fleet BINARY (scripts/package.sh calls it). dpkg-deb from a staged
# tree, not dpkg-buildpackage: the binaries are already built, both
# architectures by one amd64 machine (a cross build), and the package only
# arranges files; a debian/ folder would build them a second time per
# architecture. Holds:
#   /usr/bin/fleet
#   /usr/share/man/man1/fleet.1.gz              help2man, as the meson build makes it
#   /usr/share/bash-completion/completions/fleet   scripts/bash_completion.sh
#   /usr/share/doc/fleet/examples/              examples/ of the repository
#   /lib/systemd/system/fleet-watch@.service    fleet watch as an always-on controller
#   /usr/share/doc/fleet/{copyright,changelog.gz,README.md,install.md}
#   /usr/share/lintian/overrides/fleet          the static libraries, on purpose
# Depends: only libc6 (>= the newest GLIBC_ symbol version BINARY needs): the
# same package installs on Debian 12 and 13, Ubuntu 22.04 and 24.04.
set -euo pipefail
arch=${1:?usage: make-deb.sh ARCH VERSION BINARY OUTDIR}
version=${2:?} binary=${3:?} outdir=${4:?}
cd "$(dirname "$0")/.."
root=$PWD
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
binary=$(readlink -f "$binary")

# A fleet that runs here: the binary, or it under qemu-user for arm64 on amd64.
run=$binary
if ! "$binary" --version >/dev/null 2>&1; then
  run=$stage/fleet-run
  printf '#!/bin/sh\nexec qemu-aarch64-static %q "$@"\n' "$binary" >"$run"
  chmod 0755 "$run"
  "$run" --version >/dev/null || { echo "make-deb.sh: cannot run $binary here" >&2; exit 1; }
fi

pkg=$stage/pkg
install -d "$pkg/DEBIAN" "$pkg/usr/bin" "$pkg/usr/share/man/man1" \
  "$pkg/usr/share/bash-completion/completions" "$pkg/usr/share/doc/fleet" \
  "$pkg/lib/systemd/system"
install -m 0755 "$binary" "$pkg/usr/bin/fleet"

# fleet(1): the same help2man call as src/engine/meson.build.
bash scripts/man_commands.sh "$run" >"$stage/commands.h2m"
help2man --no-info --section=1 \
  --name='keep a fleet of GPU inference nodes in the state its manifests declare' \
  --include="$stage/commands.h2m" --output="$stage/fleet.1" "$run"
sed -i "s|$run|fleet|g" "$stage/fleet.1"
gzip -9n <"$stage/fleet.1" >"$pkg/usr/share/man/man1/fleet.1.gz"
bash scripts/bash_completion.sh "$run" >"$pkg/usr/share/bash-completion/completions/fleet"

# The examples, without what a demo or a test left in them.
cp -a examples "$pkg/usr/share/doc/fleet/examples"
find "$pkg/usr/share/doc/fleet/examples" \( -name .sim -o -name .fleet -o -name .registry \
  -o -name .gitignore \) -prune -exec rm -rf {} +
cp README.md docs/install.md "$pkg/usr/share/doc/fleet/"
install -m 0644 scripts/deb/fleet-watch@.service "$pkg/lib/systemd/system/"
install -m 0644 scripts/deb/copyright "$pkg/usr/share/doc/fleet/copyright"
# lintian: the libraries linked in on purpose (scripts/deb/lintian-overrides)
install -d "$pkg/usr/share/lintian/overrides"
install -m 0644 scripts/deb/lintian-overrides "$pkg/usr/share/lintian/overrides/fleet"
{
  printf 'fleet (%s) unstable; urgency=medium\n\n' "$version"
  printf '  * Release %s, built from %s.\n\n' "$version" \
    "$(git -C "$root" describe --always --dirty 2>/dev/null || echo 'a source tree')"
  printf ' -- fleet maintainers <maintainers@users.noreply.a-seed-168d5d4e.example>  %s\n' \
    "$(date -uR -d "@${SOURCE_DATE_EPOCH:-$(git -C "$root" log -1 --format=%ct 2>/dev/null || date +%s)}")"
} | gzip -9n >"$pkg/usr/share/doc/fleet/changelog.gz"
find "$pkg" -type d -exec chmod 0755 {} +
find "$pkg/usr/share" "$pkg/lib" -type f -exec chmod 0644 {} +

# libc6 (>= x.y): the newest GLIBC_x.y the binary asks for.
objdump=objdump
[[ $arch == amd64 ]] || objdump=aarch64-linux-gnu-objdump
glibc=$("$objdump" -T "$binary" | grep -oE 'GLIBC_[0-9]+\.[0-9]+(\.[0-9]+)?' | sed 's/GLIBC_//' |
  sort -uV | tail -n 1)
size=$(du -sk --exclude=DEBIAN "$pkg" | cut -f1)
cat >"$pkg/DEBIAN/control" <<EOF
Package: fleet
Version: $version
Architecture: $arch
Maintainer: fleet maintainers <maintainers@users.noreply.a-seed-168d5d4e.example>
Installed-Size: $size
Depends: libc6 (>= $glibc)
Suggests: git
Section: admin
Priority: optional
Description: keep a fleet of GPU inference nodes in the state its manifests declare
 fleet plans and applies what a repository of manifests declares for a lab
 of GPU inference nodes (DGX Spark and others): power, display RAM, container
 images, models, serves and gateways, over SSH, with a state file, a plan
 to review and smoke checks of every serve. fleet watch keeps it so.
 .
 One static binary (glibc only); it carries fleet-probe, its node-side GPU
 program, for amd64 and arm64 nodes.
EOF
(cd "$pkg" && find usr lib -type f -print0 | sort -z | xargs -0 md5sum >DEBIAN/md5sums)
chmod 0644 "$pkg/DEBIAN/md5sums"
mkdir -p "$outdir"
dpkg-deb --root-owner-group -Zxz --build "$pkg" "$outdir/fleet_${version}_$arch.deb" >/dev/null
