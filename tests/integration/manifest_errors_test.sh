#!/usr/bin/env bash
# Bad manifests give file:line:column errors and exit 1, never a crash, and
# nothing touches the network or the state.
source "$(dirname "$0")/lib.sh"
mkdir -p "$REPO"

check() {  # check NAME PATTERN: fleet validate fails with a located message
  expect_rc 1 validate
  no_crash
  grep -qE "fleet\.yaml:[0-9]+:[0-9]+" "$WORK/err" || fail "$1: no file:line:column"
  expect_out "$2"
  expect_rc 1 plan
  [[ ! -e $(state_file) ]] || fail "$1: state written"
}

step "malformed YAML"
printf 'version: 1\nfleet: x\nnodes: {dgx1: {address: a\n' >"$REPO/fleet.yaml"
check malformed "fleet.yaml"

step "unknown key with a suggestion"
printf 'version: 1\nfleet: x\nnodes:\n  dgx1:\n    adress: 10.0.0.1\n' >"$REPO/fleet.yaml"
check unknown "address"

step "dangling reference"
cat >"$REPO/fleet.yaml" <<'YAML'
version: 1
fleet: x
nodes:
  dgx1: {address: 10.0.0.1}
images:
  b12x: {ref: "eugr/spark-vllm-b12x@sha256:8e7e06210000000000000000000000000000000000000000000000000000beef", source: registry}
deployments:
  qwen:
    recipe: r.toml
    nodes: [dgx1]
    image: b12y
    port: 30000
YAML
printf 'model = ""\nargs = ["--x"]\n' >"$REPO/r.toml"
check dangling "b12x"

step "floating tag"
sed -i 's|@sha256:[0-9a-f]*|:latest|; s|b12y|b12x|' "$REPO/fleet.yaml"
check floating "sha256"
echo PASS
