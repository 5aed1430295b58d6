# shellcheck shell=bash
# Images imported straight onto dgx1 from a folder, no registry: the
# stand-in engine (tests/sim/fake_engine, $FLEET_FAKE_ENGINE) on busybox,
# and HAProxy laid out as the official image lays it out. For the gateway
# tests, whose nodes pull from dgx1 (source: node:dgx1).
#
# Source after lib.sh (uses $WORK, $ROOT, $CE, ce, fail).
FAKE_ENGINE=${FLEET_FAKE_ENGINE:-$ROOT/build/tests/sim/fake_engine/fake-engine}

# need_fake_engine: fails the test when the stand-in engine is not built
# (call it after the SKIP checks: a missing tool skips, a missing build fails).
need_fake_engine() {
  [[ -x $FAKE_ENGINE ]] || fail "no fake-engine at $FAKE_ENGINE (build it: ninja -C build)"
}

# import_image DIR REPO [IMPORT-OPTIONS]: DIR as an image on dgx1, tagged as
# fleet reads an imported image's digest; prints the ref.
import_image() {
  local dir=$1 repo=$2 d quiet=
  shift 2
  tar -C "$dir" -cf "$dir.tar" .
  d=$(sha256sum "$dir.tar" | cut -d' ' -f1)
  [[ $CE == podman ]] && quiet=-q  # docker import has no -q
  ce dgx1 "import $quiet $* - localhost/$repo:sha256-$d >/dev/null" <"$dir.tar" || fail "import $repo"
  echo "localhost/$repo@sha256:$d"
}

# haproxy_rootfs: HAProxy as the official image lays it out, from Debian's
# binary and the libraries it links; prints the folder.
haproxy_rootfs() {
  local root=$WORK/haproxy-root lib
  mkdir -p "$root/usr/local/sbin" "$root/usr/local/etc/haproxy" "$root/tmp"
  cp "$(command -v haproxy)" "$root/usr/local/sbin/haproxy"
  for lib in $(ldd "$(command -v haproxy)" | grep -oE '/[^ ]+'); do cp -L --parents "$lib" "$root"; done
  echo "$root"
}

# engine_rootfs: busybox and the stand-in engine at /bin/fake-engine; prints
# the folder.
engine_rootfs() {
  local root=$WORK/engine-root
  mkdir -p "$root/bin"
  cp "$(command -v busybox)" "$root/bin/busybox"
  cp "$FAKE_ENGINE" "$root/bin/fake-engine"
  ln -s busybox "$root/bin/sh"
  echo "$root"
}

# model_recipe NAME MODEL [ENV-TOML-LINES]: recipes/NAME.toml in the test's
# repo: the stand-in engine on {port} serving MODEL in 256 MB at a token a
# millisecond, ENV-TOML-LINES added to its [env].
model_recipe() {
  mkdir -p "$REPO/recipes"
  cat >"$REPO/recipes/$1.toml" <<TOML
model = ""
args = ["fake-engine", "--port", "{port}", "--served-model-name", "$2"]
memory_limit = "256m"

[env]
FAKE_ENGINE_TOKEN_MS = "1"
${3:-}
TOML
}
