#!/usr/bin/env bash
# release-libs.sh ARCH DIR: the pieces of the static release build
# (-Dstatic_libs=true, src/release/meson.build) that Debian 12 does not
# install from the packages of scripts/install-deps.sh --release, fetched
# with apt (download only: nothing is installed) into DIR:
#   DIR/lib/libpq.a, libyaml-cpp.a   libpq-dev and libyaml-cpp-dev of ARCH: not
#                                    Multi-Arch, so the arm64 ones would
#                                    replace the amd64 ones the build needs
#   DIR/lib/libpgcommon_shlib.a,     what libpq.a calls into, from
#           libpgport_shlib.a        postgresql-server-dev-15 (which would
#                                    pull in clang-14 and LLVM)
#   DIR/include/httplib.h            cpp-httplib whole, from its Debian source
#                                    (Debian's binary package is a shared
#                                    library with the split header)
# ARCH: amd64 or arm64. Kept: a DIR already complete is left as it is.
# Exit 77 when the mirror cannot be reached (the release test skips).
set -euo pipefail
arch=${1:?usage: release-libs.sh amd64|arm64 DIR}
dir=${2:?usage: release-libs.sh amd64|arm64 DIR}
case $arch in amd64 | arm64) ;; *) echo "release-libs.sh: unknown arch $arch" >&2; exit 2 ;; esac
want=(libpq.a libyaml-cpp.a libpgcommon_shlib.a libpgport_shlib.a)
complete=1
for f in "${want[@]}"; do [[ -f $dir/lib/$f ]] || complete=0; done
[[ -f $dir/include/httplib.h ]] || complete=0
((complete)) && exit 0

mkdir -p "$dir/lib" "$dir/include" "$dir/cache"
dir=$(cd "$dir" && pwd)
log=$dir/cache/apt.log
cache=$dir/cache
# apt runs its downloads as _apt where it can: a folder it may write to.
chmod 0777 "$cache"
cd "$cache"
fail() {
  echo "release-libs.sh: $1 (apt's output: $log)" >&2
  exit "${2:-1}"
}
if ! apt-get download "libpq-dev:$arch" "libyaml-cpp-dev:$arch" "postgresql-server-dev-15:$arch" >"$log" 2>&1; then
  grep -qiE 'could not resolve|failed to fetch|temporary failure|unable to connect' "$log" &&
    fail "cannot reach the Debian mirror" 77
  fail "apt-get download failed (for arm64: dpkg --add-architecture arm64 && apt-get update)"
fi
for deb in libpq-dev_*_"$arch".deb libyaml-cpp-dev_*_"$arch".deb postgresql-server-dev-15_*_"$arch".deb; do
  rm -rf x && dpkg-deb -x "$deb" x
  find x -name '*.a' \( -name libpq.a -o -name libyaml-cpp.a -o -name libpgcommon_shlib.a \
    -o -name libpgport_shlib.a \) -exec cp {} "$dir/lib/" \;
done
rm -rf x

# cpp-httplib's source, with Debian's patches, from a private deb-src list
# (the machine's apt sources stay as they are).
src_list=$cache/sources.list
# shellcheck source=/dev/null
suite=$(. /etc/os-release && echo "${VERSION_CODENAME:-bookworm}")
echo "deb-src http://deb.debian.org/debian $suite main" >"$src_list"
echo "deb-src http://deb.debian.org/debian-security $suite-security main" >>"$src_list"
mkdir -p "$cache/lists/partial"
apt_src=(-o "Dir::Etc::SourceList=$src_list" -o Dir::Etc::SourceParts=/dev/null
  -o "Dir::State::Lists=$cache/lists")
apt-get -qq "${apt_src[@]}" update >>"$log" 2>&1 || fail "cannot read the Debian source index" 77
rm -rf httplib-src cpp-httplib_*
apt-get -qq "${apt_src[@]}" source --download-only cpp-httplib >>"$log" 2>&1 ||
  fail "cannot download cpp-httplib's source" 77
dpkg-source -x cpp-httplib_*.dsc httplib-src >>"$log" 2>&1 || fail "cannot unpack cpp-httplib's source"
cp httplib-src/httplib.h "$dir/include/httplib.h"
for f in "${want[@]}"; do [[ -f $dir/lib/$f ]] || fail "no $f in the downloaded packages"; done
