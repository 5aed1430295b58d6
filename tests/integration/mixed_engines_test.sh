#!/usr/bin/env bash
# A mixed fleet (dgx1 docker, dgx2 podman): images copied docker -> podman
# and podman -> docker (save | load through the controller) arrive as the same
# image, identified by the config digest the registry digest points to
# (a copy keeps no registry digest), and the plan after is empty.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/registry.sh"
command -v dockerd >/dev/null || { echo "SKIP: dockerd not installed (apt-get install docker.io)"; exit 77; }

id_on() {  # id_on NODE REF: the config digest's hex on NODE's engine
  local id
  id=$(ce "$1" image inspect --format "'{{.Id}}'" "$2") || return 1
  echo "${id#sha256:}"
}

step "registry, 2 images, dgx1 docker, dgx2 podman"
registry_start
R=$REGISTRY
DA=$(image_push fleet/on-docker v1)
DP=$(image_push fleet/on-podman v1)
start_fleet 2 --engine mixed --insecure-registry "$R"
[[ $(node_field dgx1 engine) == docker && $(node_field dgx2 engine) == podman ]] || fail "not a mixed fleet"
ce dgx1 pull -q "$R/fleet/on-docker@$DA" >/dev/null
ce dgx2 pull -q "$R/fleet/on-podman@$DP" >/dev/null
CA=$(id_on dgx1 "$R/fleet/on-docker@$DA")
CP=$(id_on dgx2 "$R/fleet/on-podman@$DP")

step "plan: each image copied from the node that has it, across engines"
mkrepo --image "a={\"ref\": \"$R/fleet/on-docker@$DA\", \"source\": \"node:dgx1\", \"nodes\": [\"dgx1\", \"dgx2\"]}" \
  --image "p={\"ref\": \"$R/fleet/on-podman@$DP\", \"source\": \"node:dgx2\", \"nodes\": [\"dgx1\", \"dgx2\"]}"
grep -q "container_cli: docker" "$REPO/fleet.yaml" && grep -q "container_cli: podman" "$REPO/fleet.yaml" ||
  fail "the manifest does not declare both engines"
expect_rc 2 plan --detailed-exitcode
expect_out "image.a@dgx2"
expect_out "image.p@dgx1"
expect_out "copy from dgx1"
expect_out "copy from dgx2"
registry_stop  # copies go node to node, never through the registry

step "apply: docker -> podman and podman -> docker, same config digests"
expect_rc 0 apply --auto-approve
[[ $(id_on dgx2 "$CA") == "$CA" ]] || fail "dgx2 (podman) lacks config $CA from docker"
[[ $(id_on dgx1 "$CP") == "$CP" ]] || fail "dgx1 (docker) lacks config $CP from podman"
ce_exists dgx2 image "$R/fleet/on-docker:sha256-${DA#sha256:}" || fail "dgx2: the copy is not named"
ce_exists dgx1 image "$R/fleet/on-podman:sha256-${DP#sha256:}" || fail "dgx1: the copy is not named"
python3 - "$(state_file)" <<'PY'
import json, sys
s = {r["address"]: r["attributes"] for r in json.load(open(sys.argv[1]))["resources"]}
assert s["image.a@dgx2"]["via"] == "copy", s["image.a@dgx2"]
assert s["image.p@dgx1"]["via"] == "copy", s["image.p@dgx1"]
PY
assert_converged
no_crash
echo PASS
