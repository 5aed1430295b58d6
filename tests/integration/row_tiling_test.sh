#!/usr/bin/env bash
# {rows:TENSOR}, end to end: a real model (real safetensors shards) staged on
# three nodes, a deployment across them whose recipe gives each rank its row
# range of two tensors (one in args, one in env). Each running container is
# inspected: rank r of 3 has exactly floor/ceil's [begin, end) of N, where N
# is the tensor's first dimension as the staged shard's header says, and the
# three ranges tile [0, N). The plan that runs before the model is on a node
# says the rows are read at apply; the plan after reads them on every node
# and is empty. A tensor the model lacks is a plan error naming both.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/registry.sh"

PORT=$(free_port)
REV=$(printf 'fleet-row-tiling-test' | sha1sum | cut -c1-40)
T_ARGS=layers.1.0.weight  # F32 in shard 1
T_ENV=layers.2.1.weight   # BF16 in shard 2

step "registry, image, 3 nodes, a real model on dgx1"
registry_start
D=$(image_push fleet/rows v1)
R=$REGISTRY
start_fleet 3 --insecure-registry "$R"
python3 "$ROOT/tests/integration/mkmodel.py" --cache "$(node_root dgx1)/hf/hub" --repo org/tiny \
  --revision "$REV" --owner "$(node_field dgx1 user)" >/dev/null
SNAP="$(node_root dgx1)/hf/hub/models--org--tiny/snapshots/$REV"

# rows TENSOR: its first dimension, read from the staged shard's header here.
rows() {
  python3 - "$SNAP" "$1" <<'PY'
import glob, json, struct, sys
for f in sorted(glob.glob(sys.argv[1] + "/*.safetensors")):
    with open(f, "rb") as fh:
        n = struct.unpack("<Q", fh.read(8))[0]
        h = json.loads(fh.read(n))
    if sys.argv[2] in h:
        print(h[sys.argv[2]]["shape"][0]); break
PY
}
N_ARGS=$(rows $T_ARGS)
N_ENV=$(rows $T_ENV)
[[ -n $N_ARGS && -n $N_ENV ]] || fail "tensors not in the model: $N_ARGS $N_ENV"
echo "   $T_ARGS has $N_ARGS rows, $T_ENV has $N_ENV"

recipe() {  # recipe TENSOR-IN-ARGS
  mkdir -p "$REPO/recipes"
  cat >"$REPO/recipes/tiled.toml" <<TOML
model = ""
args = ["sh", "-c", "busybox mkdir -p /www/v1 && echo 'rank {rank} of {nnodes}' > /www/v1/models; if [ {rank} = 0 ]; then busybox httpd -f -p {port} -h /www & pid=\$!; else busybox sleep 100000 & pid=\$!; fi; trap 'kill \$pid; exit 0' TERM; wait \$pid", "--engram-rows={rows:$1}"]

[env]
ENGRAM_ROWS = "{rows:$T_ENV}"
TOML
}
repo() {
  mkrepo --image "bb={\"ref\": \"$R/fleet/rows@$D\", \"source\": \"registry\"}" \
    --model "m={\"repo\": \"org/tiny\", \"revision\": \"$REV\", \"store\": \"local\", \"source\": \"node:dgx1\"}" \
    --deployment "tiled={\"recipe\": \"recipes/tiled.toml\", \"nodes\": [\"dgx1\", \"dgx2\", \"dgx3\"], \"image\": \"bb\", \"model\": \"m\", \"port\": $PORT, \"health\": {\"path\": \"/v1/models\", \"timeout\": \"30s\"}}"
}
# range N R RANK: floor/ceil's begin:end, computed here on its own.
range() {
  local n=$1 r=$2 k=$3 base extra begin
  base=$((n / r)) extra=$((n % r))
  begin=$((k * base + (k < extra ? k : extra)))
  echo "$begin:$((begin + base + (k < extra ? 1 : 0)))"
}

step "a tensor the model lacks: plan error naming the model and the tensor, nothing started"
recipe no.such.tensor
repo
expect_rc 0 validate
expect_rc 1 plan
expect_out "model m"
expect_out "no tensor 'no.such.tensor'"
expect_rc 1 apply --auto-approve
ce_exists dgx2 container fleet-tiled && fail "fleet-tiled was created on dgx2"

step "plan: dgx1 reads its rows now, dgx2 and dgx3 once the model is staged"
recipe $T_ARGS
expect_rc 2 plan --detailed-exitcode
expect_out "--engram-rows=$(range "$N_ARGS" 3 0)"
expect_out "are read from model m's safetensors headers when the step runs, once it is staged on dgx2"

step "apply: each running rank has its exact range of both tensors"
expect_rc 0 apply --auto-approve
ends_args=() ends_env=()
for k in 0 1 2; do
  node=dgx$((k + 1))
  cmd=$(ce "$node" container inspect --format "'{{json .Config.Cmd}}'" fleet-tiled)
  env=$(ce "$node" container inspect --format "'{{json .Config.Env}}'" fleet-tiled)
  want_args=$(range "$N_ARGS" 3 $k)
  want_env=$(range "$N_ENV" 3 $k)
  [[ $cmd == *"\"--engram-rows=$want_args\""* ]] || fail "rank $k on $node: args $cmd, expected --engram-rows=$want_args"
  [[ $env == *"\"ENGRAM_ROWS=$want_env\""* ]] || fail "rank $k on $node: env $env, expected ENGRAM_ROWS=$want_env"
  [[ $(ce "$node" container inspect --format "'{{.State.Status}}'" fleet-tiled) == running ]] || fail "rank $k not running"
  echo "   rank $k on $node: $T_ARGS $want_args, $T_ENV $want_env"
  ends_args+=("$want_args") ends_env+=("$want_env")
done
# the three ranges tile [0, N): contiguous from 0, ending at N
python3 - "$N_ARGS" "${ends_args[@]}" <<'PY' || fail "ranges of $T_ARGS do not tile: ${ends_args[*]}"
import sys
n, at = int(sys.argv[1]), 0
for r in sys.argv[2:]:
    b, e = map(int, r.split(":"))
    assert b == at and e >= b, (r, at)
    at = e
assert at == n, (at, n)
PY
[[ $(curl -s --max-time 5 "http://127.0.0.1:$PORT/v1/models") == "rank 0 of 3" ]] || fail "the head does not serve"
assert_converged

step "another tensor replaces every rank with its new range"
recipe $T_ENV
expect_rc 2 plan --detailed-exitcode
expect_out "--engram-rows=$(range "$N_ENV" 3 2)"
expect_rc 0 apply --auto-approve
cmd=$(ce dgx3 container inspect --format "'{{json .Config.Cmd}}'" fleet-tiled)
[[ $cmd == *"\"--engram-rows=$(range "$N_ENV" 3 2)\""* ]] || fail "rank 2: $cmd"
assert_converged
expect_rc 0 destroy --auto-approve
no_crash
echo PASS
