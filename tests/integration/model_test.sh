#!/usr/bin/env bash
# Models in the hub cache, against real sshd nodes: small REAL models (three
# safetensors shards with real headers, an index, a config, a nested draft
# shard) in real hub layouts, staged node to node through fleet, broken in
# the ways the log saw, and repaired.
#   dgx1: holds model m (the source), dgx2 dgx3: staged from it,
#   dgx4: a 0-byte "download" with a .done marker, then the legacy layout,
#   dgx5: a 1 MB tmpfs at its hf cache (no room), and a store `nas` that fits,
#   dgx3 also downloads model h from the "hub": a stand-in `hf` in its
#   /srv/bin that copies from a fixture cache on the node (never the internet).
source "$(dirname "$0")/lib.sh"

# lib.sh's fl, plus a transcript of every command and its output
# (MODEL_TEST_TRANSCRIPT=FILE keeps it).
fl() {
  local rc=0
  "$FLEET" -C "$REPO" --no-color "$@" >"$WORK/out" 2>"$WORK/err" </dev/null || rc=$?
  { echo "### fleet $* (exit $rc)"; cat "$WORK/out" "$WORK/err"; } >>"$WORK/transcript"
  return $rc
}

REV=$(printf 'fleet-model-test-m' | sha1sum | cut -c1-40)
HREV=$(printf 'fleet-model-test-h' | sha1sum | cut -c1-40)
REPO_M=org/tiny-model
REPO_H=org/hub-model
DM=models--org--tiny-model
DH=models--org--hub-model
MKMODEL=$ROOT/tests/integration/mkmodel.py

node_user() { node_field "$1" user; }
node_pid() { node_field "$1" pid; }
hub() { echo "$(node_root "$1")/hf/hub"; }
snap() { echo "$(hub "$1")/$DM/snapshots/$REV"; }
# The node user cannot reach its root through the test's private folder:
# write as root, then hand it over.
give() { chown -R "$(node_user "$1")": "$2"; }
# On the host, a node path /srv/... is under the node root.
host_path() { echo "$(node_root "$1")${2#/srv}"; }

m_spec() { echo '{"repo": "'$REPO_M'", "revision": "'$REV'", "store": "local", "source": "node:dgx1", "nodes": ['"$1"']}'; }
M_SPEC=$(m_spec '"dgx2", "dgx3"')
H_SPEC='{"repo": "'$REPO_H'", "revision": "'$HREV'", "store": "local", "source": "hub", "nodes": ["dgx3"]}'

step "start 5 simulated nodes, a real model on dgx1, a hub fixture and a stand-in hf on dgx3"
start_fleet 5 --power  # a power switch, for the store step with a node declared off
FLEET_SIM_HA_TOKEN=$(cat "$SIMDIR/ha_token")
export FLEET_SIM_HA_TOKEN
python3 "$MKMODEL" --cache "$(hub dgx1)" --repo $REPO_M --revision "$REV" --owner "$(node_user dgx1)" >/dev/null
mkdir -p "$(node_root dgx3)/fixture"
python3 "$MKMODEL" --cache "$(node_root dgx3)/fixture/hub" --repo $REPO_H --revision "$HREV" --seed 7 >/dev/null
cat >"$(node_root dgx3)/bin/hf" <<'EOF'
#!/bin/sh
# Test stand-in for the hub CLI: `hf download --revision R REPO --cache-dir C`
# copies REPO@R from the fixture cache /srv/fixture/hub on this node, as the
# real one writes it (blobs via .incomplete, relative links).
echo "$$ $*" >>/srv/sim/hf.log
[ "$1" = download ] || { echo "stand-in hf: only download" >&2; exit 2; }
shift
rev= repo= cache=
while [ $# -gt 0 ]; do
  case $1 in --revision) rev=$2; shift 2 ;; --cache-dir) cache=$2; shift 2 ;; -*) shift ;; *) repo=$1; shift ;; esac
done
d=models--$(printf '%s' "$repo" | sed 's,/,--,g')
src=/srv/fixture/hub/$d
[ -f /srv/sim/hf-delay ] && sleep "$(cat /srv/sim/hf-delay)"
if [ "$(cat /srv/sim/hf-mode 2>/dev/null)" = empty ]; then
  # The log's failed wrapper: nothing downloaded, exit 0, a .done marker.
  mkdir -p "$cache/$d/snapshots/$rev" && : >"$cache/$d/.done"
  exit 0
fi
[ -d "$src/snapshots/$rev" ] || { echo "404 Not Found: $repo@$rev" >&2; exit 1; }
mkdir -p "$cache/$d/blobs" "$cache/$d/refs"
for b in "$src"/blobs/*; do
  n=${b##*/}
  [ -f "$cache/$d/blobs/$n" ] || { cp "$b" "$cache/$d/blobs/$n.incomplete" && mv "$cache/$d/blobs/$n.incomplete" "$cache/$d/blobs/$n"; } || exit 1
done
cd "$src/snapshots/$rev" && find . ! -type d | while IFS= read -r f; do
  mkdir -p "$(dirname "$cache/$d/snapshots/$rev/$f")"
  ln -sfn "$(readlink "$f")" "$cache/$d/snapshots/$rev/$f"
done
EOF
chmod 755 "$(node_root dgx3)/bin/hf"
mkrepo --model "m=$M_SPEC"

step "plan: dgx1 (the source) is verified, dgx2 and dgx3 are staged from it"
expect_rc 2 plan --detailed-exitcode
expect_out "model.m@dgx1"
expect_out "verify 7 files"
expect_out "stage from dgx1: 7 file(s)"

step "apply stages from the peer; the next plan shows no change"
expect_rc 0 apply --auto-approve
expect_out "copying 7 file(s)"
expect_out "dgx2 <- dgx1:"
for n in dgx2 dgx3; do
  for f in config.json model-00002-of-00003.safetensors draft/model.safetensors; do
    cmp -s "$(snap dgx1)/$f" "$(snap $n)/$f" || fail "$n: $f differs from dgx1's"
    [[ -L $(snap $n)/$f ]] || fail "$n: $f is not a symlink into blobs/"
  done
  [[ $(readlink "$(snap $n)/config.json") == ../../blobs/* ]] || fail "$n: link not relative"
  [[ $(readlink "$(snap $n)/draft/model.safetensors") == ../../../blobs/* ]] || fail "$n: nested link"
  [[ $(cat "$(hub $n)/$DM/refs/main") == "$REV" ]] || fail "$n: refs/main not copied"
  [[ $(stat -c %U "$(hub $n)/$DM/blobs") == "$(node_user $n)" ]] || fail "$n: blobs not the node user's"
  ! ls "$(hub $n)/$DM/blobs/" | grep -q incomplete || fail "$n: .incomplete left behind"
  [[ ! -e $(hub $n)/.fleet-staging-$DM.lock ]] || fail "$n: staging lock left behind"
done
assert_converged

step "fleet model files: every file resolved to its blob, no symlink"
expect_rc 0 model files m --node dgx2
[[ $(wc -l <"$WORK/out") == 7 ]] || fail "expected 7 bind lines"
while IFS=$'\t' read -r host container; do
  hp=$(host_path dgx2 "$host")
  [[ -f $hp && ! -L $hp ]] || fail "bind source $host is not a regular file"
  [[ $(realpath "$hp") == "$hp" ]] || fail "bind source $host has a symlink in its path"
  [[ $host == /srv/hf/hub/$DM/blobs/* ]] || fail "bind source $host is not a blob"
  [[ $container == /srv/hf/hub/$DM/snapshots/$REV/* ]] || fail "container path $container"
  cmp -s "$hp" "$(snap dgx2)/${container#/srv/hf/hub/$DM/snapshots/$REV/}" || fail "$container content"
done <"$WORK/out"
expect_rc 0 model files m --node dgx2 --container-root /model
expect_out "	/model/draft/model.safetensors"
expect_rc 1 model files m --node dgx5
expect_out "no snapshot"

step "a truncated shard, a missing shard and a broken symlink are named"
blob_of() { readlink -f "$(snap "$1")/$2"; }
truncate -s -100 "$(blob_of dgx2 model-00002-of-00003.safetensors)"
rm "$(snap dgx3)/model-00001-of-00003.safetensors"
rm "$(blob_of dgx3 config.json)"
expect_rc 2 plan --detailed-exitcode
expect_out "model-00002-of-00003.safetensors: "
expect_out "bytes, expected "
expect_out "(truncated)"
expect_out "model-00001-of-00003.safetensors: missing"
expect_out "config.json: broken symlink -> ../../blobs/"
step "apply copies only what is broken (resumable)"
expect_rc 0 apply --auto-approve
grep -q "model.m@dgx2: copying 1 file(s)" "$WORK/out" || fail "dgx2: not just the truncated shard"
grep -q "model.m@dgx3: copying 1 file(s)" "$WORK/out" || fail "dgx3: not just config.json (shard 1's blob is there: relinked)"
for n in dgx2 dgx3; do
  for f in config.json model-00001-of-00003.safetensors model-00002-of-00003.safetensors; do
    cmp -s "$(snap dgx1)/$f" "$(snap $n)/$f" || fail "$n: $f not repaired"
  done
done
assert_converged

step "a 0-byte download with a .done marker is incomplete, with the files named"
mkdir -p "$(hub dgx4)/$DM/refs" "$(snap dgx4)"
printf '%s' "$REV" >"$(hub dgx4)/$DM/refs/main"
: >"$(hub dgx4)/$DM/.done"
give dgx4 "$(hub dgx4)/$DM"
mkrepo --model "m=$(m_spec '"dgx2", "dgx3", "dgx4"')"
expect_rc 2 plan --detailed-exitcode
expect_out "model.m@dgx4"
expect_out "config.json: missing"
expect_out "model-00003-of-00003.safetensors: missing"
expect_out "marker .done present (a marker is not proof"
expect_rc 0 apply --auto-approve
cmp -s "$(snap dgx1)/model-00003-of-00003.safetensors" "$(snap dgx4)/model-00003-of-00003.safetensors" ||
  fail "dgx4 not staged"
assert_converged

step "the legacy layout (no hub/) is detected and linked with a RELATIVE symlink"
mv "$(hub dgx4)/$DM" "$(node_root dgx4)/hf/$DM"
expect_rc 2 plan --detailed-exitcode
expect_out "legacy layout"
expect_out "link the legacy layout ($DM -> ../$DM, relative)"
expect_rc 0 apply --auto-approve
[[ $(readlink "$(hub dgx4)/$DM") == "../$DM" ]] || fail "legacy link is $(readlink "$(hub dgx4)/$DM")"
assert_converged
expect_rc 0 model files m --node dgx4
while IFS=$'\t' read -r host container; do
  hp=$(host_path dgx4 "$host")
  [[ -f $hp && ! -L $hp && $(realpath "$hp") == "$hp" ]] || fail "dgx4 bind source $host"
  [[ $host == /srv/hf/$DM/blobs/* ]] || fail "dgx4 bind source $host is not the legacy blob"
  [[ $container == /srv/hf/hub/$DM/snapshots/$REV/* ]] || fail "dgx4 container path $container"
done <"$WORK/out"

step "a target without the space is refused at plan time, with the figures"
# A real 1 MB filesystem at dgx5's hf cache, mounted inside dgx5's own mount
# namespace (the host does not see it): df and ENOSPC are the kernel's.
nsenter -t "$(node_pid dgx5)" -m -- mount -t tmpfs \
  -o "size=1m,mode=0755,uid=$(id -u "$(node_user dgx5)"),gid=$(id -g "$(node_user dgx5)")" \
  fleet-model-test /srv/hf/hub
mkdir -p "$(node_root dgx5)/nas" && chown "$(node_user dgx5)" "$(node_root dgx5)/nas"
mkrepo --store 'nas={"path": "/srv/nas", "nodes": ["dgx5"]}' \
  --model "m=$(m_spec '"dgx2", "dgx3", "dgx5"')"
expect_rc 1 plan
expect_out "model.m@dgx5: needs 1.6 MB, dgx5 has 1.0 MB free at /srv/hf/hub"
expect_out "a store that fits: nas ("
[[ -z $(nsenter -t "$(node_pid dgx5)" -m -- ls -A /srv/hf/hub) ]] || fail "plan wrote on dgx5"

step "a shared store: staged once through its first node, read by every node that mounts it"
# One host folder bind-mounted at /srv/nas inside dgx4's and dgx5's own mount
# namespaces: the NAS of the log, seen by two nodes.
mkdir -p "$WORK/nas" "$(node_root dgx4)/nas"
chown "$(node_user dgx4)" "$WORK/nas"
for n in dgx4 dgx5; do nsenter -t "$(node_pid $n)" -m -- mount --bind "$WORK/nas" /srv/nas; done
S_SPEC='{"repo": "'$REPO_M'", "revision": "'$REV'", "store": "nas", "source": "node:dgx1"}'
mkrepo --store 'nas={"path": "/srv/nas", "nodes": ["dgx4", "dgx5"]}' --model "m=$M_SPEC" --model "s=$S_SPEC"
expect_rc 2 plan --detailed-exitcode
expect_out "model.s@nas will be created: stage from dgx1: 7 file(s)"
expect_rc 0 apply --auto-approve
expect_out "model.s@nas: copying 7 file(s)"
cmp -s "$(snap dgx1)/model-00003-of-00003.safetensors" "$WORK/nas/$DM/snapshots/$REV/model-00003-of-00003.safetensors" ||
  fail "the store did not get the model"
assert_converged
expect_rc 0 model files s --node dgx5
[[ $(wc -l <"$WORK/out") == 7 ]] || fail "dgx5: expected 7 bind lines for the store"
while IFS=$'\t' read -r host container; do
  [[ $host == /srv/nas/$DM/blobs/* && $container == /srv/nas/$DM/snapshots/$REV/* ]] || fail "store bind $host"
  hp=$WORK/nas/${host#/srv/nas/}
  [[ -f $hp && ! -L $hp ]] || fail "store bind source $host"
done <"$WORK/out"
expect_rc 1 model files s --node dgx2
expect_out "which node dgx2 does not mount"
step "from the store to dgx4's own cache: copied on dgx4, which mounts both"
rm -rf "$(node_root dgx4)/hf/$DM" "$(hub dgx4)/$DM"  # what model m left there (no longer declared)
T_SPEC='{"repo": "'$REPO_M'", "revision": "'$REV'", "store": "local", "source": "store:nas", "nodes": ["dgx4"]}'
mkrepo --store 'nas={"path": "/srv/nas", "nodes": ["dgx4", "dgx5"]}' --model "m=$M_SPEC" --model "s=$S_SPEC" \
  --model "t=$T_SPEC"
expect_rc 0 apply --auto-approve
expect_out "model.t@dgx4: copying 7 file(s), 1.6 MB from nas on dgx4 (it sees both: nothing crosses the network)"
cmp -s "$(snap dgx1)/model-00001-of-00003.safetensors" "$(snap dgx4)/model-00001-of-00003.safetensors" ||
  fail "dgx4 did not get the model from the store"
[[ $(readlink "$(snap dgx4)/config.json") == ../../blobs/* ]] || fail "dgx4: not a hub layout"
assert_converged

step "hub download: two applies started together stage once; the second reports the lock"
mkrepo --model "m=$M_SPEC" --model "h=$H_SPEC"
python3 "$ROOT/tests/integration/mkrepo.py" --sim "$SIMDIR" --out "$WORK/repo2" --model "h=$H_SPEC"
echo 3 >"$(node_root dgx3)/sim/hf-delay"
"$FLEET" -C "$REPO" --no-color apply --auto-approve >"$WORK/a1" 2>&1 </dev/null &
p1=$!
"$FLEET" -C "$WORK/repo2" --no-color apply --auto-approve >"$WORK/a2" 2>&1 </dev/null &
p2=$!
rc1=0 rc2=0
wait $p1 || rc1=$?
wait $p2 || rc2=$?
rm -f "$(node_root dgx3)/sim/hf-delay"
{ echo "### (together) fleet -C repo apply (exit $rc1)"; cat "$WORK/a1"; echo "### (together) fleet -C repo2 apply (exit $rc2)"; cat "$WORK/a2"; } >>"$WORK/transcript"
[[ $(grep -c download "$(node_root dgx3)/sim/hf.log") == 1 ]] ||
  { cat "$WORK/a1" "$WORK/a2" >&2; fail "hf ran $(grep -c download "$(node_root dgx3)/sim/hf.log") times"; }
if ((rc1 == 0 && rc2 != 0)); then loser=$WORK/a2; elif ((rc2 == 0 && rc1 != 0)); then loser=$WORK/a1; else
  cat "$WORK/a1" "$WORK/a2" >&2
  fail "expected exactly one apply to fail (rc $rc1, $rc2)"
fi
grep -q "staging in progress by pid [0-9]* on dgx3 since" "$loser" || { cat "$loser" >&2; fail "no lock report"; }
grep -q "not starting a duplicate" "$loser" || fail "no duplicate refusal"
[[ -L $(hub dgx3)/$DH/snapshots/$HREV/model-00001-of-00003.safetensors ]] || fail "h not downloaded"
# Each repo converges; the one that lost adopts what the other downloaded
# (verify, no second download).
REPO_SAVE=$REPO
for REPO in "$REPO_SAVE" "$WORK/repo2"; do
  expect_rc 0 apply --auto-approve
  assert_converged
done
REPO=$REPO_SAVE
[[ $(grep -c download "$(node_root dgx3)/sim/hf.log") == 1 ]] || fail "hf ran again"

# plant_lock PID BOOT_ID: dgx3's staging lock of model h as a keeper that
# died would leave it (the owner line it writes).
plant_lock() {
  mkdir "$(hub dgx3)/.fleet-staging-$DH.lock"
  echo "$1 dgx3 $2 1700000000" >"$(hub dgx3)/.fleet-staging-$DH.lock/owner"
  give dgx3 "$(hub dgx3)/.fleet-staging-$DH.lock"
}

step "a stale lock (dead pid) is taken over, and said"
rm -rf "$(hub dgx3)/$DH/snapshots"
plant_lock 999999 "$(cat "$SIMDIR/nodes/dgx3/boot_id")"
expect_rc 2 plan --detailed-exitcode
expect_out "a stale staging lock (pid 999999 is gone): apply takes it over"
expect_rc 0 apply --auto-approve
expect_out "took over a stale staging lock (999999 dgx3"
[[ ! -e $(hub dgx3)/.fleet-staging-$DH.lock ]] || fail "lock left behind"
assert_converged

step "a stale lock beside a complete model (power lost as staging ended) is removed, not kept"
downloads=$(grep -c download "$(node_root dgx3)/sim/hf.log")
plant_lock 999998 an-earlier-boot
expect_rc 2 plan --detailed-exitcode
expect_out "remove the stale staging lock of pid 999998"
expect_rc 0 apply --auto-approve
expect_out "took over a stale staging lock (999998 dgx3"
[[ ! -e $(hub dgx3)/.fleet-staging-$DH.lock ]] || fail "stale lock beside a complete model left behind"
[[ $(grep -c download "$(node_root dgx3)/sim/hf.log") == "$downloads" ]] ||
  fail "removing a stale lock downloaded again"
assert_converged

step "a live keeper whose fleet process is gone: the plan says apply takes the lock over, and it does"
# What a controller killed while its node's sshd had not noticed leaves: a
# keeper on dgx3 that still holds the lock for a fleet process of this host
# that no longer runs. It removes the lock on TERM, as the real keeper's trap.
rm -rf "$(hub dgx3)/$DH/snapshots"
cat >"$(node_root dgx3)/sim/fake-keeper" <<'EOF2'
l=/srv/hf/hub/.fleet-staging-$2.lock
mkdir "$l" || exit 1
sh -c 'trap "rm -rf -- \"$0\"; exit 0" TERM; while :; do sleep 0.1; done' "$l" </dev/null >/dev/null 2>&1 &
echo "$! $(uname -n) $(cat /proc/sys/kernel/random/boot_id) $(date +%s) $1 $(readlink /proc/self/ns/pid | tr -cd 0-9)" >"$l/owner"
echo $!
EOF2
gone_pid=$(sh -c 'echo $$')  # a process of this host that has exited
ctl="$(uname -n)/$gone_pid/12345/$(cat /proc/sys/kernel/random/boot_id).$(stat -L -c %i /proc/self/ns/pid)"
keeper=$(on_node dgx3 sh /srv/sim/fake-keeper "$ctl" "$DH") || fail "could not start a keeper on dgx3"
expect_rc 2 plan --detailed-exitcode
expect_out "for fleet pid $gone_pid on $(uname -n), whose fleet process is gone: an apply from this controller ends its keeper and takes the lock over"
expect_rc 0 apply --auto-approve
expect_out "its fleet process ($ctl) is gone"
# (The nodes share this host's pid namespace; an ended keeper whose parent
# went with its ssh session may stay a zombie: ended all the same.)
[[ $(ps -o stat= -p "$keeper" || true) == @(|Z*) ]] || fail "the dead controller's keeper (pid $keeper) still runs"
[[ ! -e $(hub dgx3)/.fleet-staging-$DH.lock ]] || fail "lock left behind after the takeover"
assert_converged

step "a download that exits 0 with nothing (the log's .done) is an error, not a success"
rm -rf "$(hub dgx3)/$DH/snapshots"
echo empty >"$(node_root dgx3)/sim/hf-mode"
expect_rc 1 apply --auto-approve
expect_out "still incomplete after the download (it exited 0)"
rm -f "$(node_root dgx3)/sim/hf-mode"
step "a node without hf: a clear error naming the fallback"
mv "$(node_root dgx3)/bin/hf" "$WORK/hf"
expect_rc 1 apply --auto-approve
expect_out '`hf` is not installed on the node'
expect_out "uv tool run hf download"
mv "$WORK/hf" "$(node_root dgx3)/bin/hf"
expect_rc 0 apply --auto-approve
assert_converged

step "deep verify: blobs hashed against their names; a flipped byte is found"
expect_rc 0 apply --auto-approve --verify=deep
expect_out "deep verify: 7 file(s) match their blob names"
expect_out "files at once by fleet-probe"  # the probe apply installed hashes (mmap), not openssl dgst
printf 'X' | dd of="$(blob_of dgx2 model-00003-of-00003.safetensors)" bs=1 seek=5000 conv=notrunc status=none
expect_rc 0 plan --detailed-exitcode  # same size: a sizes plan cannot see it
expect_rc 1 apply --auto-approve --verify=deep
expect_out "model-00003-of-00003.safetensors: content hash"
expect_out "(corrupt)"
rm "$(blob_of dgx2 model-00003-of-00003.safetensors)"
expect_rc 0 apply --auto-approve
cmp -s "$(snap dgx1)/model-00003-of-00003.safetensors" "$(snap dgx2)/model-00003-of-00003.safetensors" ||
  fail "dgx2 shard 3 not restaged"
assert_converged

step "destroy keeps models"
expect_rc 0 plan --destroy --json
python3 - "$WORK/out" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
models = [c for c in p["changes"] if c["type"] == "model"]
assert len(models) == 4, models
for c in models:
    assert c["action"] == "noop" and "kept" in c["summary"], c
PY

# Optional: Hugging Face's own cache scanner (npm @huggingface/hub) reads
# the caches fleet wrote without a warning. Its scanCacheDir (2.17) lists a
# snapshot's top-level files only: 6 of the 7 (not draft/model.safetensors).
# NODE_PATH may point at a node_modules holding it.
if command -v node >/dev/null && node -e 'require("@huggingface/hub")' 2>/dev/null; then
  step "huggingface's own scanner reads the caches fleet wrote"
  for n in dgx2 dgx3 dgx4; do
    node -e '
      const {scanCacheDir} = require("@huggingface/hub");
      scanCacheDir(process.argv[1]).then(r => {
        const repo = r.repos.find(x => x.id.name === "org/tiny-model");
        const rev = repo && repo.revisions.find(v => v.commitOid === process.argv[2]);
        if (r.warnings.length || !rev || rev.files.length !== 6) {
          console.error(r.warnings.map(String), JSON.stringify(repo, (k, v) => typeof v === "bigint" ? Number(v) : v));
          process.exit(1);
        }
      });' "$(hub $n)" "$REV" || fail "scanCacheDir on $n"
  done
fi
step "no longer declared: the record goes, the files stay; --purge removes what fleet staged"
mkrepo --model "m=$(m_spec '"dgx2"')" --model "h=$H_SPEC"
expect_rc 2 plan --detailed-exitcode
expect_out "model.m@dgx3 will be destroyed: forget (no longer declared; the files stay in /srv/hf/hub; --purge removes what fleet staged)"
expect_rc 0 plan --purge
expect_out "model.m@dgx3 will be destroyed: remove org/tiny-model@${REV:0:12} (1.6 MB) from /srv/hf/hub (--purge)"
[[ -d $(snap dgx3) ]] || fail "plan removed something"
expect_rc 0 apply --auto-approve --purge
expect_out "removed org/tiny-model@${REV:0:12}, freed 1.6 MB"
[[ ! -e $(hub dgx3)/$DM ]] || fail "dgx3 still has $DM"
[[ -d $(hub dgx3)/$DH/snapshots/$HREV ]] || fail "the other model on dgx3 was touched"
[[ -d $(snap dgx1) ]] || fail "the source was touched"
assert_converged

step "a store whose first node is declared off (and is off) is planned and staged through the next one"
# nas is still bind-mounted in dgx4's and dgx5's namespaces; dgx4 goes down.
"$SIM" node-stop "$SIMDIR" dgx4 >/dev/null
rm -rf "${WORK:?}/nas/$DM"
# The manifests from here on: dgx4 declared off, the store through dgx5.
mkrepo_off() {
  mkrepo --power --power-off dgx4 --store 'nas={"path": "/srv/nas", "nodes": ["dgx4", "dgx5"]}' \
    --model "m=$(m_spec '"dgx2"')" --model "h=$H_SPEC" --model "s=$S_SPEC" "$@"
}
mkrepo_off
expect_rc 2 plan --detailed-exitcode
expect_out "model.s@nas will be created: stage from dgx1: 7 file(s)"
expect_out "reason: store nas is read through dgx5: dgx4 is declared off"
expect_rc 0 plan --json
python3 - "$WORK/out" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
s = [c for c in p["changes"] if c["address"] == "model.s@nas"][0]
assert s["node"] == "dgx5" and "node.dgx5" in s["depends_on"], s
PY
# The store's folder is dgx4's user's: dgx5's user cannot write there, and
# says so (not "staging in progress").
expect_rc 1 apply --auto-approve
expect_out "cannot take the staging lock /srv/nas/.fleet-staging-$DM.lock: the lock keeper exited 73: mkdir: cannot create directory"
expect_out "Permission denied"
chown "$(node_user dgx5)" "$WORK/nas"
expect_rc 0 apply --auto-approve
expect_out "model.s@nas: copying 7 file(s)"
cmp -s "$(snap dgx1)/model-00003-of-00003.safetensors" "$WORK/nas/$DM/snapshots/$REV/model-00003-of-00003.safetensors" ||
  fail "the store did not get the model through dgx5"
[[ $("$SIM" node-status "$SIMDIR" dgx4) == off ]] || fail "dgx4 was started"
assert_converged

step "a floating revision (main, allow_floating): the commit the source's refs/main names is staged, and said"
F_SPEC='{"repo": "'$REPO_M'", "revision": "main", "allow_floating": true, "store": "local", "source": "node:dgx1", "nodes": ["dgx3"]}'
mkrepo_off --model "f=$F_SPEC"
[[ ! -e $(hub dgx3)/$DM ]] || fail "dgx3 should not hold $DM (purged above)"
expect_rc 2 plan --detailed-exitcode
expect_out "model.f@dgx3 will be created: stage from dgx1: 7 file(s)"
expect_out "FLOATING REVISION main (allow_floating): dgx3 has no refs/main; staging $REV, what main is on dgx1, and pointing refs/main at it"
expect_out "FLOATING REVISION main (allow_floating): refs/main on dgx1 is $REV"
expect_rc 0 apply --auto-approve
expect_out "refs/main -> $REV"
[[ $(cat "$(hub dgx3)/$DM/refs/main") == "$REV" ]] || fail "dgx3: refs/main not written"
for f in config.json model-00001-of-00003.safetensors draft/model.safetensors; do
  cmp -s "$(snap dgx1)/$f" "$(snap dgx3)/$f" || fail "dgx3: $f differs from dgx1's"
done
assert_converged
expect_rc 0 plan --detailed-exitcode
expect_out "model.f@dgx3: FLOATING REVISION main (allow_floating): refs/main on dgx3 is $REV"

step "the source's main moves: the plan says the nodes disagree; dgx3 keeps its own commit"
REV2=$(printf 'fleet-model-test-m2' | sha1sum | cut -c1-40)
python3 "$MKMODEL" --cache "$(hub dgx1)" --repo $REPO_M --revision "$REV2" --seed 9 --owner "$(node_user dgx1)" >/dev/null
[[ $(cat "$(hub dgx1)/$DM/refs/main") == "$REV2" ]] || fail "mkmodel did not move refs/main"
expect_rc 2 plan --detailed-exitcode
expect_out "nodes disagree on what main is: "
expect_out "${REV:0:12} on dgx3"
expect_out "${REV2:0:12} on dgx1"
expect_out "refs/main on dgx1 is $REV2"
expect_no_out "model.f@dgx3 will be"
expect_rc 0 apply --auto-approve
[[ $(cat "$(hub dgx3)/$DM/refs/main") == "$REV" ]] || fail "dgx3: refs/main moved"
assert_converged

[[ -z ${MODEL_TEST_TRANSCRIPT:-} ]] || cp "$WORK/transcript" "$MODEL_TEST_TRANSCRIPT"
echo PASS
