#!/bin/sh
# shellcheck disable=SC2034 # $els is read by the script that follows
# The container engine's API socket: sets $els to the socket through which
# the node's container CLI $engine_cli ("docker" or "podman") reaches its
# engine, else "". Not under a docker context or a remote DOCKER_HOST (the
# CLI's engine is elsewhere), and podman's only while its service already
# runs (a socket-activated one would start on the first call).
# Embedded in fleet at build time (kEngineSocketScript) and run inside the
# caller's shell after `engine_cli=CLI` (quoted once by fleet). Defines only
# $els, $edc and $eps.
els=
case ${engine_cli?} in
  docker)
    edc=${DOCKER_CONFIG:-$HOME/.docker}/config.json
    if [ -z "${DOCKER_CONTEXT-}" ] && { [ ! -f "$edc" ] || ! grep -q '"currentContext"' "$edc" 2>/dev/null; }; then
      case ${DOCKER_HOST-} in
        unix://*) els=${DOCKER_HOST#unix://} ;;
        '')
          els=/run/docker.sock
          [ -S "$els" ] || els=/var/run/docker.sock
          ;;
      esac
      [ -S "$els" ] || els=
    fi
    ;;
  podman)
    eps=${XDG_RUNTIME_DIR:-/nonexistent}/podman/podman.sock
    if [ -z "${CONTAINER_HOST-}" ] && [ -S "$eps" ] && {
      [ ! -d "$XDG_RUNTIME_DIR/systemd" ] || systemctl --user is-active --quiet podman.service 2>/dev/null
    }; then
      els=$eps
    fi
    ;;
esac
