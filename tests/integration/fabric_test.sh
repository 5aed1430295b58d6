#!/usr/bin/env bash
# The fabric between nodes, on a two-network simulated fleet
# (fleet-sim --net lan+fabric: a rate-limited LAN to the controller, a
# fabric between the nodes, a fake /sys/class/infiniband per node):
# - `fleet probe` shows the fabric port, address, GID index, HCA;
# - an image on dgx1 is copied to dgx2..dgx4 over the fabric, at once, the
#   plan naming the route; the controller's LAN sees almost none of the bytes;
# - a node declared on another subnet gets its copy through the controller,
#   and the plan says why;
# - a wrong key is refused: the step fails, nothing is named, no listener stays;
# - during a transfer the key is in 0600 files in 0700 dirs on the two
#   nodes, and on no process's command line or in its environment;
# - the source killed mid-transfer: the step fails, nothing half-loaded is
#   named, the listener is gone, and a re-apply completes;
# - a model staged from dgx1 over the fabric, verified on arrival;
# - the source killed mid-transfer of a model: the step fails, only
#   .incomplete files are left (no blob name holds a partial file), no
#   listener stays, and a re-apply resumes and completes;
# - a fabric address gone between plan and apply: apply sees it, copies
#   through the controller and says so;
# - a fabric link down between plan and apply (addresses still there): no
#   connection can be made, so the image and the model go through the
#   controller, said so, and nothing is left on the nodes.
source "$(dirname "$0")/lib.sh"

for tool in ip tc nsenter openssl podman; do
  command -v "$tool" >/dev/null || { echo "SKIP: $tool not installed"; exit 77; }
done

ctl_bytes() {  # bytes the controller sent + received on the LAN so far
  "$SIM" net-stats "$SIMDIR" | awk -F= '{s += $2} END {printf "%.0f\n", s}'
}
# The node user's fabric temp dirs made by this test (a uid of an earlier,
# killed run's node may be this run's now).
: >"$WORK/started"
fabric_dirs_of() { find /tmp -maxdepth 1 -name 'fleet-fabric.*' -user "$1" -newer "$WORK/started"; }
# apply_killing_sender DELAY PGREP-MATCH...: an apply in the background; the
# first process of dgx1's user ($src_user) that pgrep matches is SIGKILLed
# DELAY seconds after it shows. Sets killed (its pid, or empty) and rc.
apply_killing_sender() {
  local delay=$1 pid _
  shift
  fl apply --auto-approve &
  local apply_pid=$!
  killed=
  for _ in $(seq 400); do
    pid=$(pgrep -u "$src_user" "$@" | head -n 1 || true)
    if [[ -n $pid ]]; then
      sleep "$delay"
      kill -KILL "$pid" 2>/dev/null && killed=$pid
      break
    fi
    sleep 0.02
  done
  rc=0
  wait "$apply_pid" || rc=$?
}
netns_of() { sed -n 's/^netns=//p' "$SIMDIR/nodes/$1/node.env"; }
no_listener_on() {  # no openssl of the node's user runs, no fabric temp dir is left
  local user
  user=$(node_field "$1" user)
  # the node's scripts end just after fleet has its answer: give them 5 s
  local _
  for _ in $(seq 50); do
    pgrep -u "$user" -x openssl >/dev/null || [[ -n $(fabric_dirs_of "$user") ]] || return 0
    sleep 0.1
  done
  ! pgrep -u "$user" -x openssl >/dev/null || fail "$1: an openssl process is still running: $(pgrep -a -u "$user" -x openssl)"
  fail "$1: a fleet-fabric temp dir is left in /tmp: $(fabric_dirs_of "$user" | xargs ls -la 2>&1 | head -20)"
}
has_config() { on_node "$1" "podman image exists $2"; }
psk_file_of() {  # the PSK session file of a running transfer of the user $1 made by this test
  # (find fails when a dir it walks goes away meanwhile: no file then)
  { find /tmp -maxdepth 2 -path '/tmp/fleet-fabric.*/psk' -user "$1" -newer "$WORK/started" 2>/dev/null || true; } | head -n 1
}
# check_no_secret_in_procs SOURCE-USER TARGET-USER: while a transfer runs,
# its key (read from the target's PSK file) is on no process's command line
# or in its environment (the hex key in either case, any base64 line of the
# PEM); the key files are 0600 in 0700 dirs; the scan did see both openssl ends.
check_no_secret_in_procs() {
  local sf tf key _
  for _ in $(seq 400); do
    sf=$(psk_file_of "$1")
    tf=$(psk_file_of "$2")
    [[ -n $sf && -n $tf ]] && pgrep -u "$1" -x openssl >/dev/null && break
    sleep 0.05
  done
  [[ -n $sf && -n $tf ]] || fail "never saw the two ends' PSK files"
  cmp -s "$sf" "$tf" || fail "the two ends hold different PSK files"
  for f in "$sf" "$tf"; do
    [[ $(stat -c %a "$f") == 600 && $(stat -c %a "$(dirname "$f")") == 700 ]] ||
      fail "$f: mode $(stat -c %a "$f"), its dir $(stat -c %a "$(dirname "$f")")"
  done
  # (a file read after its transfer ended is gone: said so, not a silent set -e exit)
  key=$(openssl sess_id -in "$tf" -noout -text 2>/dev/null | sed -n 's/^ *Resumption PSK: *//p' || true)
  [[ $key =~ ^[0-9A-Fa-f]{64}$ ]] || fail "no PSK in $tf (exists: $([[ -e $tf ]] && echo yes || echo no))"
  { echo "$key"; sed '/^-----/d' "$tf"; } >"$WORK/needles" || fail "$tf went away during the scan"
  python3 - "$WORK/needles" <<'PY' || fail "the transfer's key is visible to other users (above)"
import os, sys
needles = [l.strip() for l in open(sys.argv[1]) if l.strip()]
needles += [n.lower() for n in needles] + [n.upper() for n in needles]
seen_ends, leaks = 0, []
for pid in filter(str.isdigit, os.listdir("/proc")):
    for what in ("cmdline", "environ"):
        try:
            data = open(f"/proc/{pid}/{what}", "rb").read().decode("latin-1")
        except OSError:
            continue
        if what == "cmdline" and "openssl" in data and "-psk_session" in data:
            seen_ends += 1
        leaks += [f"pid {pid} {what}: {data[:120]!r}" for n in needles if n in data]
print("\n".join(leaks))
if seen_ends < 2:
    print(f"the scan saw {seen_ends} openssl end(s) of the transfer, not 2")
sys.exit(1 if leaks or seen_ends < 2 else 0)
PY
  rm -f "$WORK/needles"
}
names_of() { on_node "$1" "podman images --format '{{.Repository}}:{{.Tag}}' | grep fleet/fab || true"; }

step "start 4 nodes on two networks"
start_fleet 4 --net lan+fabric

step "fleet probe shows the fabric"
mkrepo
expect_rc 0 probe dgx2
expect_out "fabric:     10.77.0.12 (10.77.0.0/24) on enp1s0f1np1, from the probe, RoCE v2 GID index 3, HCA rocep1s0f1"
expect_out "rocep1s0f0 port 1 DOWN"
expect_rc 0 probe dgx2 --json
python3 -c '
import json, sys
f = json.load(open(sys.argv[1]))["fabric"]
act = [p for p in f if p["state"] == "ACTIVE"]
assert len(f) == 2 and len(act) == 1, f
assert act[0]["ipv4"] == "10.77.0.12" and act[0]["gid_index"] == 3 and act[0]["rate_gbps"] == 200, act
' "$WORK/out" || fail "probe --json fabric facts"

# Nodes adopted and fleet-probe installed first: the copies below are all
# that is measured.
expect_rc 0 apply --auto-approve

step "an image on dgx1 only (imported: no registry reachable from the nodes)"
# 60 MB: the controller's path carries it twice (in and out), well above
# what fleet's own sessions carry (< 1 MB), and a transfer lasts long enough
# to be killed or scanned where dgx1's fabric egress is slowed (tc below).
# (It was 120 MB: every copy, load and controller pass took twice as long.)
D=sha256:$(printf 'fleet fabric test' | sha256sum | cut -d' ' -f1)
REF="localhost/fleet/fab@$D"
on_node dgx1 "d=\$(mktemp -d) && head -c 60000000 /dev/urandom > \$d/blob && tar -C \$d -c blob | podman import -q - localhost/fleet/fab:sha256-${D#sha256:} >/dev/null && rm -rf \$d"
C=$(on_node dgx1 "podman image inspect --format '{{.Id}}' localhost/fleet/fab:sha256-${D#sha256:}")
[[ $C =~ ^[0-9a-f]{64}$ ]] || fail "no image id on dgx1: $C"
IMG='fab={"ref": "'$REF'", "source": "node:dgx1", "nodes": ["dgx1", "dgx2", "dgx3", "dgx4"]}'

# (issue 11's plan view; a block of its own)
step "the plan shows the copies' routes combined per source (text, Markdown, JSON, saved plan)"
mkrepo --image "$IMG" --fabric 'dgx4={address: 10.99.0.14}'
expect_rc 2 plan --detailed-exitcode -out "$WORK/routes.plan" --markdown "$WORK/routes.md"
expect_out "Copies between nodes, per source:"
FAN="image fab: dgx1 → dgx2 → dgx3 over fabric 10.77.0.0/24 (one chain: each byte leaves dgx1 once)"
expect_out "  $FAN"
expect_out "  image fab: dgx1 → dgx4 through the controller (no common fabric subnet)"
grep -qxF -- "- \`$FAN\`" "$WORK/routes.md" ||
  fail "the Markdown summary lacks the fabric route: $(cat "$WORK/routes.md")"
grep -qxF -- '- `image fab: dgx1 → dgx4 through the controller (no common fabric subnet)`' "$WORK/routes.md" ||
  fail "the Markdown summary lacks the controller route"
expect_rc 0 show "$WORK/routes.plan"
expect_out "  $FAN"
expect_rc 2 plan --json --detailed-exitcode
python3 -c '
import json, sys
copies = {c["node"]: c["copy"] for c in json.load(open(sys.argv[1]))["changes"] if "copy" in c}
assert sorted(copies) == ["dgx2", "dgx3", "dgx4"], copies
chain = [{"node": "dgx2", "address": "10.77.0.12"}, {"node": "dgx3", "address": "10.77.0.13"}]
assert copies["dgx2"] == {"what": "image fab", "from": "dgx1", "to": "dgx2", "direct": True,
                          "fabric": "10.77.0.0/24", "to_address": "10.77.0.12", "chain": chain}, copies
assert copies["dgx3"]["chain"] == chain and "chain" not in copies["dgx4"], copies
assert copies["dgx4"]["direct"] is False and copies["dgx4"]["why_not"] == "no common fabric subnet", copies
' "$WORK/out" || fail "plan --json: the changes' copy routes"

step "copy to dgx2..dgx4 over the fabric, at once (one chain: tests/integration/fabric_chain_test.sh)"
mkrepo --image "$IMG"
expect_rc 2 plan --detailed-exitcode
expect_out "dgx1 → dgx2 → dgx3 → dgx4 over fabric 10.77.0.0/24 (one chain"
before=$(ctl_bytes)
t0=${EPOCHREALTIME/./}
expect_rc 0 apply --auto-approve
ms=$(((${EPOCHREALTIME/./} - t0) / 1000))
used=$(($(ctl_bytes) - before))
echo "   3 copies of 60 MB in $ms ms; the controller's LAN carried $used bytes"
((used < 3000000)) || fail "the controller carried $used bytes for 180 MB over the fabric"
for n in dgx2 dgx3 dgx4; do
  has_config $n "$C" || fail "$n lacks image $C"
  no_listener_on $n
done
grep -q "TLS-PSK" "$WORK/transcript" || fail "apply did not say how it copied"
# The transfer's key is on the node-side command lines only: never shown.
grep -Eq -e '-psk |k=[0-9a-f]{64}' "$WORK/transcript" && fail "a transfer key in fleet's output"
assert_converged

step "a node on another fabric subnet gets its copy through the controller"
on_node dgx4 "podman rmi -f $C >/dev/null"
mkrepo --image "$IMG" --fabric 'dgx4={address: 10.99.0.14}'
expect_rc 2 plan --detailed-exitcode
expect_out "dgx1 → dgx4 through the controller (dgx1 (10.77.0.11) and dgx4 (10.99.0.14) share no fabric subnet)"
before=$(ctl_bytes)
expect_rc 0 apply --auto-approve
used=$(($(ctl_bytes) - before))
((used > 100000000)) || fail "the controller path carried only $used bytes"
has_config dgx4 "$C" || fail "dgx4 lacks image $C"
mkrepo --image "$IMG"
assert_converged

step "a wrong key is refused and leaves nothing"
on_node dgx3 "podman rmi -f $C >/dev/null"
FLEET_TEST_FABRIC_WRONG_KEY=1 expect_rc 1 apply --auto-approve
expect_out "image.fab@dgx3"
expect_out "the stream did not end cleanly"
! has_config dgx3 "$C" || fail "dgx3 has the image after a refused stream"
[[ -z $(names_of dgx3) ]] || fail "dgx3: names left: $(names_of dgx3)"
no_listener_on dgx3
no_listener_on dgx1

step "during the re-apply's transfer the key is on no command line nor in any environment"
src_user=$(node_field dgx1 user)
ns1=$(netns_of dgx1)
# dgx1's fabric egress slowed: the transfer lasts the few seconds the scan
# needs (60 MB at 100mbit: about 5 s)
tc -n "$ns1" qdisc replace dev enp1s0f1np1 root tbf rate 100mbit burst 256k latency 200ms
fl apply --auto-approve &
apply_pid=$!
check_no_secret_in_procs "$src_user" "$(node_field dgx3 user)"
rc=0
wait "$apply_pid" || rc=$?
tc -n "$ns1" qdisc del dev enp1s0f1np1 root
[[ $rc == 0 ]] || fail "the re-apply exited $rc: $(tail -n 5 "$WORK/err")"
has_config dgx3 "$C" || fail "dgx3 lacks the image after the re-apply"
no_listener_on dgx3

step "the source killed mid-transfer"
on_node dgx2 "podman rmi -f $C >/dev/null"
# dgx1's fabric egress slowed (60 MB in about 1.2 s): the kill lands mid-transfer
tc -n "$ns1" qdisc replace dev enp1s0f1np1 root tbf rate 400mbit burst 256k latency 200ms
apply_killing_sender 0.1 -f s_client
tc -n "$ns1" qdisc del dev enp1s0f1np1 root
[[ -n $killed ]] || fail "never saw the source's s_client to kill"
[[ $rc == 1 ]] || fail "apply exited $rc after the source was killed"
grep -q "image.fab@dgx2" "$WORK/out" "$WORK/err" || fail "the failed step is not named"
! has_config dgx2 "$C" || fail "dgx2 holds the half-sent image"
[[ -z $(names_of dgx2) ]] || fail "dgx2: names left: $(names_of dgx2)"
no_listener_on dgx2
expect_rc 0 apply --auto-approve
has_config dgx2 "$C" || fail "dgx2 lacks the image after the re-apply"
assert_converged

step "a model staged from dgx1 over the fabric"
REV=$(printf 'fleet-fabric-model' | sha1sum | cut -c1-40)
python3 "$ROOT/tests/integration/mkmodel.py" --cache "$(node_root dgx1)/hf/hub" --repo fleet/fab-model \
  --revision "$REV" --shards 3 --shard-kb 8192 --owner "$(node_field dgx1 user)" >/dev/null
if [[ $REV =~ ^[0-9a-f]{40}$ ]]; then
  mkrepo --image "$IMG" --model 'm={"repo": "fleet/fab-model", "revision": "'$REV'", "source": "node:dgx1", "nodes": ["dgx2"]}'
  expect_rc 2 plan --detailed-exitcode
  expect_out "dgx1 → dgx2 over fabric 10.77.0.0/24"
  before=$(ctl_bytes)
  expect_rc 0 apply --auto-approve
  used=$(($(ctl_bytes) - before))
  echo "   model: the controller's LAN carried $used bytes"
  ((used < 2000000)) || fail "the controller carried $used bytes for a 25 MB model over the fabric"
  no_listener_on dgx2
  assert_converged
else
  echo "   (skipped: mkmodel.py does not make a model this way)"
fi

step "the source killed mid-transfer of a model"
REV2=$(printf 'fleet-fabric-model-kill' | sha1sum | cut -c1-40)
python3 "$ROOT/tests/integration/mkmodel.py" --cache "$(node_root dgx1)/hf/hub" --repo fleet/fab-big \
  --revision "$REV2" --shards 2 --shard-kb 30720 --owner "$(node_field dgx1 user)" >/dev/null
BIG='big={"repo": "fleet/fab-big", "revision": "'$REV2'", "source": "node:dgx1", "nodes": ["dgx3"]}'
mkrepo --image "$IMG" --model 'm={"repo": "fleet/fab-model", "revision": "'$REV'", "source": "node:dgx1", "nodes": ["dgx2"]}' --model "$BIG"
blobs=$(node_root dgx3)/hf/hub/models--fleet--fab-big/blobs
# (the image step above SIGKILLed dgx1's send script, whose temp dir stays)
src_dirs=$(fabric_dirs_of "$src_user" | sort)
# dgx1's fabric egress slowed for the kill: on an idle machine 60 MB cross
# the veth in a fraction of a second, before the kill could land (at 200
# mbit about 2.4 s)
tc -n "$ns1" qdisc replace dev enp1s0f1np1 root tbf rate 200mbit burst 256k latency 200ms
apply_killing_sender 0.3 -x openssl  # the sender, s_client
tc -n "$ns1" qdisc del dev enp1s0f1np1 root
[[ -n $killed ]] || fail "never saw the source's openssl s_client to kill"
[[ $rc == 1 ]] || fail "apply exited $rc after the source was killed"
grep -q "model.big@dgx3" "$WORK/out" "$WORK/err" || fail "the failed step is not named"
partial=$(find "$blobs" -name '*.incomplete' -size +0 | wc -l)
((partial >= 1)) || fail "no partial .incomplete blob on dgx3 to resume from: $(ls -la "$blobs")"
# Every blob under its final name is whole: LFS blobs hash to their name.
for f in "$blobs"/*; do
  b=$(basename "$f")
  [[ $b == *.incomplete ]] && continue
  if [[ ${#b} == 64 ]]; then
    [[ $(sha256sum <"$f" | cut -d' ' -f1) == "$b" ]] || fail "dgx3 names a half-copied blob $b"
  fi
done
no_listener_on dgx3
! pgrep -u "$src_user" -x openssl >/dev/null || fail "dgx1: an openssl process is still running"
[[ $(fabric_dirs_of "$src_user" | sort) == "$src_dirs" ]] ||
  fail "dgx1: the killed sender left a fleet-fabric temp dir"
resumed_from=$(find "$blobs" -name '*.incomplete' -printf '%s\n' | sort -n | tail -n 1)
expect_rc 0 apply --auto-approve
expect_out "dgx1 → dgx3 over fabric 10.77.0.0/24"
[[ -z $(find "$blobs" -name '*.incomplete') ]] || fail ".incomplete blobs left after the re-apply"
echo "   resumed a blob from $resumed_from bytes"
no_listener_on dgx3
assert_converged

step "the fabric gone between plan and apply: the copy goes through the controller, said so"
on_node dgx4 "podman rmi -f $C >/dev/null"
expect_rc 0 plan -out "$WORK/fab.plan"
expect_out "dgx1 → dgx4 over fabric 10.77.0.0/24"
ns4=$(netns_of dgx4)
ip -n "$ns4" addr del 10.77.0.14/24 dev enp1s0f1np1
before=$(ctl_bytes)
expect_rc 0 apply "$WORK/fab.plan"
used=$(($(ctl_bytes) - before))
ip -n "$ns4" addr add 10.77.0.14/24 dev enp1s0f1np1
expect_out "the fabric is not usable now (dgx4 no longer has 10.77.0.14 on any interface): copying through the controller instead"
((used > 100000000)) || fail "the controller path carried only $used bytes"
has_config dgx4 "$C" || fail "dgx4 lacks image $C"
assert_converged

step "a fabric link down between plan and apply: no connection, so through the controller, said so"
on_node dgx4 "podman rmi -f $C >/dev/null"
mkrepo --image "$IMG" --model 'm={"repo": "fleet/fab-model", "revision": "'$REV'", "source": "node:dgx1", "nodes": ["dgx2", "dgx4"]}' --model "$BIG"
expect_rc 0 plan -out "$WORK/fab.plan"
expect_out "dgx1 → dgx4 over fabric 10.77.0.0/24"
ip -n "$ns4" link set enp1s0f1np1 down
before=$(ctl_bytes)
t0=${EPOCHREALTIME/./}
rc=0
fl apply "$WORK/fab.plan" || rc=$?
ms=$(((${EPOCHREALTIME/./} - t0) / 1000))
used=$(($(ctl_bytes) - before))
ip -n "$ns4" link set enp1s0f1np1 up
[[ $rc == 0 ]] || fail "apply exited $rc with dgx4's fabric link down: $(tail -n 5 "$WORK/err")"
echo "   apply with dgx4's fabric link down: $ms ms; the controller's LAN carried $used bytes"
expect_out "no connection over the fabric (source exited 75: fabric: could not connect to 10.77.0.14:"
expect_out "no byte was sent): copying dgx1 → dgx4 through the controller instead"
fallbacks=$(cat "$WORK/out" "$WORK/err" | grep -c "copying dgx1 → dgx4 through the controller instead")
((fallbacks >= 2)) || fail "the image and the model did not both say so ($fallbacks)"
# the image (60 MB) and the model (25 MB) in and out of the controller: 170
# MB, and more than the image's 120 MB alone
((used > 150000000)) || fail "the controller path carried only $used bytes"
has_config dgx4 "$C" || fail "dgx4 lacks image $C"
[[ -z $(find "$(node_root dgx4)/hf/hub/models--fleet--fab-model/blobs" -name '*.incomplete') ]] ||
  fail "dgx4: .incomplete blobs left"
no_listener_on dgx4
! pgrep -u "$src_user" -x openssl >/dev/null || fail "dgx1: an openssl process is still running"
[[ $(fabric_dirs_of "$src_user" | sort) == "$src_dirs" ]] || fail "dgx1: a fleet-fabric temp dir is left"
assert_converged

echo PASS
