# A test image that serves like a real engine: busybox-static and the
# OpenAI-compatible stand-in (tests/sim/fake_engine, $FLEET_FAKE_ENGINE) at
# /bin/fake-engine. Source after registry.sh.
FAKE_ENGINE=${FLEET_FAKE_ENGINE:-$ROOT/build/tests/sim/fake_engine/fake-engine}

# engine_image_push REPO TAG: builds the image, pushes it to $REGISTRY/REPO:TAG
# and prints its registry (manifest) digest.
engine_image_push() {
  local repo=$1 tag=$2 dir
  [[ -x $FAKE_ENGINE ]] || fail "no fake-engine at $FAKE_ENGINE (build it: ninja -C build)"
  dir=$(mktemp -d "$WORK/rootfs.XXXXXX")
  mkdir -p "$dir/root/bin" "$dir/root/etc"
  cp "$BUSYBOX" "$dir/root/bin/busybox"
  cp "$FAKE_ENGINE" "$dir/root/bin/fake-engine"
  ln -s busybox "$dir/root/bin/sh"
  printf '%s:%s\n' "$repo" "$tag" >"$dir/root/etc/fleet-test-image"
  tar -C "$dir/root" -cf "$dir/rootfs.tar" .
  build_podman import -q --change 'CMD ["/bin/fake-engine"]' "$dir/rootfs.tar" \
    "localhost/fleet-build:$tag" >/dev/null || fail "podman import"
  build_podman push -q --tls-verify=false --digestfile "$dir/digest" \
    "localhost/fleet-build:$tag" "$REGISTRY/$repo:$tag" >/dev/null 2>&1 ||
    fail "podman push $REGISTRY/$repo:$tag"
  cat "$dir/digest"
  rm -rf "$dir"
}

# engine_recipe NAME [TOML-LINES]: recipes/NAME.toml in the test's repo: the
# stand-in engine on {port} serving "qwen38" in 256 MB, TOML-LINES (e.g. an
# [env] table) after.
engine_recipe() {
  mkdir -p "$REPO/recipes"
  {
    printf '%s\n' 'model = ""' \
      'args = ["fake-engine", "--port", "{port}", "--served-model-name", "qwen38"]' 'memory_limit = "256m"'
    [[ -z ${2:-} ]] || printf '%s\n' "$2"
  } >"$REPO/recipes/$1.toml"
}

# engine_fleet N [fleet-sim start options]: the opening of the tests that
# serve the stand-in engine: the registry, the engine image pushed to it as
# fleet/engine:v1 (D: its digest), N simulated nodes allowed to pull from it,
# and recipes/e.toml (engine_recipe e). The image is built and pushed while
# the nodes start (each takes a few seconds, mostly waiting).
engine_fleet() {
  local n=$1 push rc=0
  shift
  registry_start
  engine_image_push fleet/engine v1 >"$WORK/engine.digest" 2>"$WORK/engine.push.err" &
  push=$!
  BG_PIDS+=("$push")
  start_fleet "$n" --insecure-registry "$REGISTRY" "$@"
  wait "$push" || rc=$?
  ((rc == 0)) || fail "the engine image: $(cat "$WORK/engine.push.err")"
  D=$(<"$WORK/engine.digest")
  [[ $D == sha256:* ]] || fail "the engine image's digest: '$D'"
  engine_recipe e
}
