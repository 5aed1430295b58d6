#!/usr/bin/env bash
# The container engine is checked at plan time, never found broken half way
# through an apply (issue 10): on a node declared `container_cli: docker`
# - whose docker CLI is installed but no daemon answers (dgx2: a podman
#   node with the host's docker CLI on PATH, the log's "Cannot connect to the
#   Docker daemon"), a display RAM unlock, an image or a deployment is a plan
#   error naming the fix (`sudo systemctl start docker`), exit 1, and apply
#   changes nothing;
# - whose daemon's socket the user may not use (dgx1's socket given to
#   another group), the error names `sudo usermod -aG docker USER`;
# - once the daemon answers, the same manifests plan cleanly.
source "$(dirname "$0")/lib.sh"

start_fleet 2 --engine dgx1=docker,dgx2=podman
U1=$(node_field dgx1 user)
IMG='{"ref": "127.0.0.1:9/fleet/none@sha256:'$(printf 'x' | sha256sum | cut -c1-64)'", "source": "registry"'

step "docker CLI, no daemon: an unlock is a plan error with the fix, nothing applied"
mkrepo --container-cli dgx2=docker --unlock dgx2
expect_rc 1 plan
expect_out "display_ram.dgx2: cannot list the serving containers before the reload"
expect_out "the Docker daemon does not answer on dgx2"
expect_out "sudo systemctl start docker"
expect_rc 1 apply --auto-approve
expect_out "sudo systemctl start docker"
[[ $(param dgx2 modeset) == N && $(param dgx2 fbdev) == Y ]] || fail "dgx2's module was reloaded"
[[ ! -s $(node_root dgx2)/sim/modprobe.log ]] || fail "modprobe ran on dgx2: $(cat "$(node_root dgx2)/sim/modprobe.log")"
[[ ! -e $(state_file) ]] || ! grep -q display_ram "$(state_file)" || fail "state records an unlock"

step "docker CLI, no daemon: an image too (plan --json lists the error)"
mkrepo --container-cli dgx2=docker --image "img=$IMG, \"nodes\": [\"dgx2\"]}"
expect_rc 1 plan --json
python3 - "$WORK/out" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
errs = [e for e in p["errors"] if "dgx2" in e]
assert errs and "sudo systemctl start docker" in errs[0], p["errors"]
assert "Docker daemon does not answer on dgx2" in errs[0], errs
PY

step "the socket is not the user's: the error names usermod -aG docker"
nsenter -t "$(cat "$SIMDIR/nodes/dgx1/dockerd.pid")" -m chgrp root /run/docker.sock
mkrepo --image "img=$IMG, \"nodes\": [\"dgx1\"]}"
expect_rc 1 plan
expect_out "user $U1 may not use the Docker daemon on dgx1"
expect_out "sudo usermod -aG docker $U1"
nsenter -t "$(cat "$SIMDIR/nodes/dgx1/dockerd.pid")" -m chgrp "$(id -g "$U1")" /run/docker.sock

step "the daemon answers: the same manifests plan the pull"
expect_rc 2 plan --detailed-exitcode
expect_out "image.img@dgx1"
expect_no_out "usermod"
no_crash
echo PASS
