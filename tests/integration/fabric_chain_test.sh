#!/usr/bin/env bash
# A fan-out over the fabric as one pipelined chain (issue 31), on a
# two-network simulated fleet with shaped fabric links (fleet-sim --net
# lan+fabric --fabric-rate: the link, not this machine's 2 CPUs, binds):
# - the plan shows the chain (dgx1 → dgx2 → dgx3 → dgx4 → dgx5), in text
#   and JSON;
# - an image and a model to 4 targets in one apply: each byte leaves the
#   source once (its fabric netdev's tx_bytes ≤ 1.05 × the `save` stream
#   and the model's files), every target holds the image (recorded as a
#   copy) and the model's files, nothing is left listening, converged;
# - a middle node lost mid-transfer (fleet-sim crash: power loss): the
#   nodes before it complete, those behind it are re-routed and complete,
#   the lost one is named, nothing half-loaded is named, and once the node
#   is back a re-apply completes it and converges;
# - the same when the node goes silent (fleet-sim crash-silent: its packets
#   dropped, no FIN or RST), well before TCP would give up on it (~15 min).
source "$(dirname "$0")/lib.sh"

for tool in ip tc nsenter openssl podman; do
  command -v "$tool" >/dev/null || { echo "SKIP: $tool not installed"; exit 77; }
done

netns_of() { sed -n 's/^netns=//p' "$SIMDIR/nodes/$1/node.env"; }
src_tx() { ip netns exec "$(netns_of dgx1)" cat /sys/class/net/enp1s0f1np1/statistics/tx_bytes; }
# read_src_tx: sets SRC_TX to the same counter without starting a process
# (the cue's poll below reads it every 50 ms: an `ip netns exec`, a `cat`
# and a `sed` each time): /proc/PID/net/dev of a process in dgx1's netns
# (its sshd; dgx1 runs throughout) lists the netns's devices, tx bytes
# the 9th figure.
read_src_tx() {
  local dev rest f
  SRC_TX=
  while IFS=: read -r dev rest; do
    [[ ${dev// /} == enp1s0f1np1 ]] || continue
    read -ra f <<<"$rest"
    SRC_TX=${f[8]}
  done <"$SRC_NETDEV"
  [[ $SRC_TX =~ ^[0-9]+$ ]] || fail "no tx bytes of dgx1's fabric link in its sshd's /proc/PID/net/dev"
}
has_config() { on_node "$1" "podman image exists $2"; }
names_of() { on_node "$1" "podman images --format '{{.Repository}}:{{.Tag}}' | grep fleet/chain || true"; }
no_openssl_on() {
  local user _
  user=$(node_field "$1" user)
  for _ in $(seq 50); do
    pgrep -u "$user" -x openssl >/dev/null || return 0
    nap 0.1
  done
  fail "$1: an openssl process is still running: $(pgrep -a -u "$user" -x openssl)"
}
# egress_within BYTES PAYLOAD: the source sent at most 1.05 x the payload.
egress_within() {
  python3 -c 'import sys; e, p = int(sys.argv[1]), int(sys.argv[2]); print(f"   source egress {e} B = {e / p:.3f} x payload"); sys.exit(0 if e <= 1.05 * p else 1)' "$1" "$2" ||
    fail "the source sent $1 bytes for a payload of $2: more than once"
}

# apply_crashing_dgx3 BYTES TOTAL [CRASH]: an apply in the background;
# dgx3 loses power (fleet-sim CRASH, default crash) once its hop runs (an
# openssl of its user) and dgx1 has sent BYTES more over its fabric link.
# The cue, not the clock, decides where the fault lands: dgx1's sending
# openssl is held (SIGSTOP) from the cue until dgx3 is down, so the bytes
# after BYTES are still owed however long the crash takes to start on a
# loaded machine (a race of 2026-12-05: dgx4 and dgx5 had the whole image
# before dgx3 went, and nothing needed re-routing). It fails if the cue
# came after dgx1 had sent TOTAL. The apply must fail (dgx3 lost).
apply_crashing_dgx3() {
  local before crashed='' u1 u3 _ apply_pid rc=0 crash=${3:-crash} sent
  u1=$(node_field dgx1 user)
  u3=$(node_field dgx3 user)
  before=$(src_tx)
  # dgx1's link at a tenth of its rate while dgx3 goes: this loop looks
  # every 50 ms, and at 20mbit the cue (a third of the payload) comes ~8 s
  # before the end, a margin no loaded machine's delay eats.
  ip netns exec "$(netns_of dgx1)" tc qdisc replace dev enp1s0f1np1 root tbf rate 20mbit burst 131072 latency 50ms
  fl apply --auto-approve &
  apply_pid=$!
  # The bytes first: a pgrep reads every process's /proc entry, and dgx3's
  # hop runs from the chain's start, long before the cue's bytes are sent.
  for _ in $(seq 600); do
    read_src_tx
    if ((SRC_TX > before + $1)) && pgrep -u "$u3" -x openssl >/dev/null; then
      pkill -STOP -u "$u1" -x openssl || true
      read_src_tx
      sent=$((SRC_TX - before))
      "$SIM" "$crash" "$SIMDIR" dgx3 >/dev/null && crashed=1
      pkill -CONT -u "$u1" -x openssl || true
      break
    fi
    nap 0.05
  done
  wait "$apply_pid" || rc=$?
  ip netns exec "$(netns_of dgx1)" tc qdisc replace dev enp1s0f1np1 root tbf rate 200mbit burst 250000 latency 50ms
  [[ -n $crashed ]] || fail "never saw dgx3's hop under way to crash it"
  ((sent < $2)) || fail "the cue came late: dgx1 had sent $sent of $2 bytes when dgx3 went"
  echo "   dgx3 went with $sent of $2 bytes sent by dgx1"
  [[ $rc == 1 ]] || fail "apply exited $rc with dgx3 lost"
}

step "start 5 nodes on two networks, fabric links shaped to 200mbit"
start_fleet 5 --net lan+fabric --fabric-rate 200mbit
SRC_NETDEV=/proc/$(<"$SIMDIR/nodes/dgx1/sshd/sshd.pid")/net/dev
# The cue's counter is sysfs's (read between two reads of it: the link may send).
tx_a=$(src_tx)
read_src_tx
tx_b=$(src_tx)
((tx_a <= SRC_TX && SRC_TX <= tx_b)) || fail "dgx1's fabric tx bytes: $SRC_TX in /proc/PID/net/dev, $tx_a..$tx_b in sysfs"
mkrepo
expect_rc 0 apply --auto-approve

step "an image and a model on dgx1 only, declared on all 5"
D=sha256:$(printf 'fleet chain test' | sha256sum | cut -d' ' -f1)
REF="localhost/fleet/chain@$D"
on_node dgx1 "d=\$(mktemp -d) && head -c 30000000 /dev/urandom > \$d/blob && tar -C \$d -c blob | podman import -q - localhost/fleet/chain:sha256-${D#sha256:} >/dev/null && rm -rf \$d"
C=$(on_node dgx1 "podman image inspect --format '{{.Id}}' localhost/fleet/chain:sha256-${D#sha256:}")
[[ $C =~ ^[0-9a-f]{64}$ ]] || fail "no image id on dgx1: $C"
PAYLOAD=$(on_node dgx1 "podman save sha256:$C | wc -c")
IMG='chain={"ref": "'$REF'", "source": "node:dgx1", "nodes": ["dgx1", "dgx2", "dgx3", "dgx4", "dgx5"]}'
REV=$(printf 'fleet-chain-model' | sha1sum | cut -c1-40)
python3 "$ROOT/tests/integration/mkmodel.py" --cache "$(node_root dgx1)/hf/hub" --repo fleet/chain-model \
  --revision "$REV" --shards 4 --shard-kb 6144 --owner "$(node_field dgx1 user)" >/dev/null
snap() { echo "$(node_root "$1")/hf/hub/models--fleet--chain-model/snapshots/$REV"; }
sums() { (cd "$(snap "$1")" && find -L . -type f | sort | xargs sha256sum); }
SUMS1=$(sums dgx1)  # dgx1's files never change: summed once
MPAYLOAD=$(find -L "$(snap dgx1)" -type f -printf '%s\n' | awk '{s += $1} END {print s}')
MODEL='m={"repo": "fleet/chain-model", "revision": "'$REV'", "source": "node:dgx1", "nodes": ["dgx2", "dgx3", "dgx4", "dgx5"]}'
mkrepo --image "$IMG" --model "$MODEL"

step "the plan shows one chain for each"
expect_rc 2 plan --detailed-exitcode
expect_out "image chain: dgx1 → dgx2 → dgx3 → dgx4 → dgx5 over fabric 10.77.0.0/24 (one chain: each byte leaves dgx1 once)"
expect_out "model m: dgx1 → dgx2 → dgx3 → dgx4 → dgx5 over fabric 10.77.0.0/24 (one chain: each byte leaves dgx1 once)"
expect_rc 2 plan --json --detailed-exitcode
python3 -c '
import json, sys
changes = json.load(open(sys.argv[1]))["changes"]
hops = [{"node": f"dgx{i}", "address": f"10.77.0.1{i}"} for i in range(2, 6)]
for kind in ("image", "model"):
    copies = {c["node"]: c["copy"] for c in changes if c["type"] == kind and "copy" in c}
    assert sorted(copies) == ["dgx2", "dgx3", "dgx4", "dgx5"], copies
    for n, c in copies.items():
        assert c["chain"] == hops and c["to_address"] == f"10.77.0.1{n[3]}", c
' "$WORK/out" || fail "plan --json: every change of a fan-out carries its chain"

step "apply: the image and the model leave dgx1 once, every target holds them, verified"
before=$(src_tx)
expect_rc 0 apply --auto-approve
egress_within $(($(src_tx) - before)) $((PAYLOAD + MPAYLOAD))
expect_out "one chain:"
expect_out "one chain per file"
for n in dgx2 dgx3 dgx4 dgx5; do
  has_config $n "$C" || fail "$n lacks image $C"
  [[ $(sums $n) == "$SUMS1" ]] || fail "$n: the model's files differ from dgx1's"
  no_openssl_on $n
done
grep -Eq -e '-psk |k=[0-9a-f]{64}' "$WORK/transcript" && fail "a transfer key in fleet's output"
python3 -c '
import json, sys
recs = {r["address"]: r for r in json.load(open(sys.argv[1]))["resources"]}
for n in ("dgx2", "dgx3", "dgx4", "dgx5"):
    a = recs["image.chain@" + n]["attributes"]
    assert a["via"] == "copy" and a["from"] == "dgx1", (n, a)
' "$(state_file)" || fail "every target is recorded as a copy from dgx1"
assert_converged

# lose_dgx3_in_image CRASH [SAID]: dgx3 lost (fleet-sim CRASH) while the
# image goes down the chain: dgx2 completes, dgx4 and dgx5 are re-routed
# from dgx2 and complete, dgx3 is named (and SAID is in the output); back
# on, a re-apply completes it.
lose_dgx3_in_image() {
  local n t0=$SECONDS took
  for n in dgx2 dgx3 dgx4 dgx5; do on_node $n "podman rmi -f $C >/dev/null"; done
  apply_crashing_dgx3 $((PAYLOAD / 3)) "$PAYLOAD" "$1"
  took=$((SECONDS - t0))
  echo "   apply with dgx3 lost ($1): ${took} s"
  ((took < 240)) || fail "the apply took ${took} s with dgx3 lost ($1): it waited for TCP"
  expect_out "dgx3 was lost mid-transfer"
  expect_out "re-routing dgx2 → dgx4 → dgx5"
  expect_out "image.chain@dgx5: copied over the fabric chain (re-routed from dgx2) from dgx1"
  [[ -z ${2-} ]] || expect_out "$2"
  for n in dgx2 dgx4 dgx5; do
    has_config $n "$C" || fail "$n lacks image $C after dgx3 was lost ($1)"
    no_openssl_on $n
  done
  grep -q "image.chain@dgx3" "$WORK/out" "$WORK/err" || fail "the lost node's step is not named"
  "$SIM" node-start "$SIMDIR" dgx3 >/dev/null
  expect_rc 0 apply --auto-approve
  has_config dgx3 "$C" || fail "dgx3 lacks the image after the re-apply"
  [[ $(names_of dgx3) == *"fleet/chain:sha256-"* ]] || fail "dgx3: the image is not named: $(names_of dgx3)"
}

# lose_dgx3_in_model CRASH: the same for the model: the others complete and
# verify, no node that answers is taken for lost, and nothing half-written
# is left once a re-apply completed dgx3.
lose_dgx3_in_model() {
  local n t0=$SECONDS took
  for n in dgx2 dgx3 dgx4 dgx5; do rm -rf "$(node_root $n)/hf/hub/models--fleet--chain-model"; done
  apply_crashing_dgx3 $((MPAYLOAD / 3)) "$MPAYLOAD" "$1"
  took=$((SECONDS - t0))
  echo "   apply with dgx3 lost ($1): ${took} s"
  ((took < 240)) || fail "the apply took ${took} s with dgx3 lost ($1): it waited for TCP"
  expect_out "dgx3 was lost mid-transfer"
  grep -q "model.m@dgx3" "$WORK/out" "$WORK/err" || fail "the lost node's step is not named"
  grep -E "lost: .*dgx[245]" "$WORK/out" && fail "a node that answers was taken for lost"
  for n in dgx2 dgx4 dgx5; do
    [[ $(sums $n) == "$SUMS1" ]] || fail "$n: the model's files differ from dgx1's after dgx3 was lost ($1)"
    no_openssl_on $n
  done
  "$SIM" node-start "$SIMDIR" dgx3 >/dev/null
  expect_rc 0 apply --auto-approve
  [[ $(sums dgx3) == "$SUMS1" ]] || fail "dgx3: the model's files differ from dgx1's after the re-apply"
  [[ -z $(find "$(node_root dgx3)/hf/hub/models--fleet--chain-model/blobs" -name '*.incomplete') ]] ||
    fail "dgx3: .incomplete blobs left after the re-apply"
  assert_converged
}

step "dgx3, a middle node, lost mid-transfer of the image (power loss): the others complete, a re-apply completes it"
lose_dgx3_in_image crash

step "dgx3 lost mid-transfer of the model: the others complete and verify, a re-apply completes it"
lose_dgx3_in_model crash

step "dgx3 goes silent mid-transfer of the image (no FIN, no RST): the same, well before TCP gives up"
lose_dgx3_in_image crash-silent "the hop after dgx2 answered it nothing for 30 s"

step "dgx3 goes silent mid-transfer of the model: the same"
lose_dgx3_in_model crash-silent
echo PASS
