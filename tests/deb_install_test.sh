#!/usr/bin/env bash
# deb_install_test [DEB...]: each Debian package of scripts/package.sh (default:
# dist/fleet_*_<this machine's arch>.deb) installed with apt into a fresh
# debootstrapped Debian 13 ("trixie", minbase), where `fleet --version` and
# `fleet -C /usr/share/doc/fleet/examples/spark-lab validate` run; then lintian
# on it (its tags printed, errors fail). Run as root.
# Skips (77): no package built (the suite does not build one: run
# `bash scripts/package.sh` first), no debootstrap, or the mirror is not
# reachable. DEB_TEST_MIRROR: another mirror; DEB_TEST_CACHE: a folder that
# keeps the debootstrap tarball between runs (default build/deb-test).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
arch=$(dpkg --print-architecture)
debs=("$@")
if ((${#debs[@]} == 0)); then
  shopt -s nullglob
  debs=("$root"/dist/fleet_*_"$arch".deb)
  shopt -u nullglob
fi
((${#debs[@]})) || { echo "SKIP: no dist/fleet_*_$arch.deb (bash scripts/package.sh makes it)"; exit 77; }
command -v debootstrap >/dev/null || { echo "SKIP: debootstrap not installed"; exit 77; }
mirror=${DEB_TEST_MIRROR:-http://deb.debian.org/debian}
if ! curl -fsS -m 20 -o /dev/null "$mirror/dists/trixie/InRelease"; then
  echo "SKIP: the mirror $mirror cannot be reached from here (debootstrap needs it)"
  exit 77
fi
cache=${DEB_TEST_CACHE:-$root/build/deb-test}
mkdir -p "$cache"
tarball=$cache/trixie-$arch-minbase.tgz
work=$(mktemp -d /var/tmp/fleet-deb-test.XXXXXX)
trap 'rm -rf "$work"' EXIT
if [[ ! -f $tarball ]]; then
  echo "== debootstrap: a Debian 13 (trixie) minbase tarball from $mirror (kept: $tarball)"
  debootstrap --variant=minbase --make-tarball="$tarball.new" trixie "$work/tb" "$mirror" \
    >"$cache/debootstrap.log" 2>&1 || { tail -n 20 "$cache/debootstrap.log"; exit 1; }
  mv "$tarball.new" "$tarball"
  rm -rf "$work/tb"
fi
echo "== debootstrap: a fresh Debian 13 root"
debootstrap --variant=minbase --unpack-tarball="$tarball" trixie "$work/root" "$mirror" \
  >"$cache/debootstrap.log" 2>&1 || { tail -n 20 "$cache/debootstrap.log"; exit 1; }
grep -q '^VERSION_CODENAME=trixie' "$work/root/etc/os-release" || { echo "FAIL: not a trixie root"; exit 1; }
echo "   $(grep '^PRETTY_NAME' "$work/root/etc/os-release")"

for deb in "${debs[@]}"; do
  echo "== $(basename "$deb") into it with apt"
  cp "$deb" "$work/root/tmp/fleet.deb"
  # The chroot's own /proc, in a mount namespace of this test.
  # shellcheck disable=SC2016 # expanded by that sh
  unshare --mount --fork -- sh -eu -c '
    r=$1
    mount -t proc proc "$r/proc"
    chroot "$r" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q /tmp/fleet.deb >"$r/tmp/apt.log" 2>&1 ||
      { tail -n 20 "$r/tmp/apt.log"; exit 1; }
    echo "== in the Debian 13 root: fleet --version"
    chroot "$r" fleet --version
    echo "== in the Debian 13 root: fleet -C /usr/share/doc/fleet/examples/spark-lab validate"
    chroot "$r" fleet -C /usr/share/doc/fleet/examples/spark-lab validate
    chroot "$r" sh -c "test -f /usr/share/man/man1/fleet.1.gz && test -f /usr/share/bash-completion/completions/fleet && test -f /lib/systemd/system/fleet-watch@.service"
  ' sh "$work/root" || { echo "FAIL: $(basename "$deb") in Debian 13"; exit 1; }
  rm -f "$work/root/tmp/fleet.deb"
  if command -v lintian >/dev/null; then
    echo "== lintian $(basename "$deb")"
    rc=0
    lintian --info --tag-display-limit 0 "$deb" || rc=$?
    ((rc == 0)) || { echo "FAIL: lintian reports errors"; exit 1; }
  fi
done
echo "deb_install_test: ok"
