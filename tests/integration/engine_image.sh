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
