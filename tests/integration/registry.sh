# Helpers for integration tests that need container images: a real registry
# (Debian's docker-registry) on a free loopback port with its storage in the
# test's work dir, started and stopped by PID; and small real images built
# from busybox-static with the controller's podman (root, storage of its own
# in the work dir), pushed by digest.
#
# Source after lib.sh (uses $WORK, fail). Start the sim with
# `--insecure-registry "$REGISTRY"` so node users can pull from it over HTTP.
REGISTRY_BIN=${REGISTRY_BIN:-/usr/bin/docker-registry}
BUSYBOX=${BUSYBOX:-/bin/busybox}
REGISTRY=""        # host:port, set by registry_start
REGISTRY_DIR=""

# The controller's podman for building and pushing: never the host's storage.
build_podman() {
  podman --root "$WORK/podman/root" --runroot "$WORK/podman/run" --storage-driver vfs "$@"
}

registry_cleanup() {
  registry_stop
  [[ -d $WORK/podman ]] && build_podman rmi -a -f >/dev/null 2>&1
  true
}
trap 'registry_cleanup; cleanup' EXIT

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# registry_start [PORT]: starts the registry (on PORT, or a free one; a
# restart reuses its storage) and waits until it answers. Sets REGISTRY.
registry_start() {
  local port=${1:-$(free_port)} i
  REGISTRY_DIR=$WORK/registry
  mkdir -p "$REGISTRY_DIR/data"
  cat >"$REGISTRY_DIR/config.yml" <<YAML
version: 0.1
log: {level: warn}
storage:
  filesystem: {rootdirectory: $REGISTRY_DIR/data}
  delete: {enabled: true}
http: {addr: "127.0.0.1:$port"}
YAML
  "$REGISTRY_BIN" serve "$REGISTRY_DIR/config.yml" >>"$REGISTRY_DIR/log" 2>&1 &
  echo $! >"$REGISTRY_DIR/pid"
  REGISTRY=127.0.0.1:$port
  for ((i = 0; i < 100; i++)); do
    if python3 -c 'import sys, urllib.request; urllib.request.urlopen("http://%s/v2/" % sys.argv[1], timeout=1)' \
      "$REGISTRY" 2>/dev/null; then
      return 0
    fi
    kill -0 "$(cat "$REGISTRY_DIR/pid")" 2>/dev/null || break
    sleep 0.1
  done
  cat "$REGISTRY_DIR/log" >&2
  fail "registry did not start on $REGISTRY"
}

# registry_stop: stops the registry started by registry_start (by its PID).
registry_stop() {
  [[ -n $REGISTRY_DIR && -f $REGISTRY_DIR/pid ]] || return 0
  local pid
  pid=$(cat "$REGISTRY_DIR/pid")
  rm -f "$REGISTRY_DIR/pid"
  kill "$pid" 2>/dev/null || return 0
  wait "$pid" 2>/dev/null || true
}

# image_push REPO TAG [PAYLOAD_MB]: builds a small image (busybox-static, a
# file naming it, optional random payload), pushes it to $REGISTRY/REPO:TAG
# and prints its registry (manifest) digest. Each call makes a new image.
image_push() {
  local repo=$1 tag=$2 mb=${3:-0} dir
  dir=$(mktemp -d "$WORK/rootfs.XXXXXX")
  mkdir -p "$dir/root/bin" "$dir/root/etc"
  cp "$BUSYBOX" "$dir/root/bin/busybox"
  ln -s busybox "$dir/root/bin/sh"
  printf '%s:%s %s\n' "$repo" "$tag" "$dir" >"$dir/root/etc/fleet-test-image"
  ((mb == 0)) || head -c "${mb}M" /dev/urandom >"$dir/root/payload"
  tar -C "$dir/root" -cf "$dir/rootfs.tar" .
  build_podman import -q --change 'CMD ["/bin/sh"]' "$dir/rootfs.tar" "localhost/fleet-build:$tag" \
    >/dev/null || fail "podman import"
  build_podman push -q --tls-verify=false --digestfile "$dir/digest" \
    "localhost/fleet-build:$tag" "$REGISTRY/$repo:$tag" >/dev/null 2>&1 || fail "podman push $REGISTRY/$repo:$tag"
  cat "$dir/digest"
  rm -rf "$dir"
}

# image_push_again TAG NAME: pushes the image image_push built for TAG once
# more, to $REGISTRY/NAME, and prints the digest (the same manifest under
# another name: same bytes, same digest).
image_push_again() {
  local tag=$1 name=$2 f
  f=$(mktemp "$WORK/digest.XXXXXX")
  build_podman push -q --tls-verify=false --digestfile "$f" \
    "localhost/fleet-build:$tag" "$REGISTRY/$name" >/dev/null 2>&1 || fail "podman push $REGISTRY/$name"
  cat "$f"
  rm -f "$f"
}
