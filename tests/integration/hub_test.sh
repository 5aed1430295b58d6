#!/usr/bin/env bash
# Models from the Hugging Face Hub, against a stand-in Hub on loopback
# (tests/sim/hub_server.py) and the stand-in hub CLI (tests/sim/hf):
#   - the plan asks the Hub for the revision's sizes: the log's 636 GB repo
#     onto a store with 251 GB free is refused with both figures, onto a
#     store with room it is planned (no byte of it exists anywhere);
#   - a gated repo: refused at plan time without the token, downloaded with
#     it; the token reaches the node's download on stdin only (never in
#     argv, ps, the log, the plan or the state);
#   - the hub CLI in ~/.local/bin, which the node's login PATH lacks, is
#     found, after the error's fix text was followed;
#   - a second real client, npm's @huggingface/hub (tests/sim/hf-js), as
#     the node's hf: fleet finds its cache complete, converged;
#   - a Hub that does not answer: the plan says so, apply asks again;
#   - a store on a hung mount (a FUSE file system that never answers,
#     tests/sim/hang_fs.py): the plan names it within its bound and goes
#     on with the rest; fleet watch keeps its rounds.
source "$(dirname "$0")/lib.sh"

REV_HUGE=$(printf 'fleet-hub-test-huge' | sha1sum | cut -c1-40)
REV_G=$(printf 'fleet-hub-test-gated' | sha1sum | cut -c1-40)
TOKEN=hf_fleetHubTestToken$RANDOM$RANDOM$RANDOM
HUB=$WORK/hub
DG=models--org--gated-model

fl() {
  local rc=0
  "$FLEET" -C "$REPO" --no-color "$@" >"$WORK/out" 2>"$WORK/err" </dev/null || rc=$?
  { echo "### fleet $* (exit $rc)"; cat "$WORK/out" "$WORK/err"; } >>"$WORK/transcript"
  return $rc
}

step "a stand-in Hub: a 636 GB repo (sizes only) and a small gated one (real files)"
mkdir -p "$HUB"
python3 "$ROOT/tests/integration/mkmodel.py" --cache "$WORK/fixture" --repo org/gated-model \
  --revision "$REV_G" --seed 3 >/dev/null
python3 - "$HUB/repos.json" "$REV_HUGE" "$REV_G" "$WORK/fixture/$DG/snapshots/$REV_G" <<'PY'
import json, sys
out, huge, gated, root = sys.argv[1:]
files = [{"path": "config.json", "size": 4321}, {"path": "model.safetensors.index.json", "size": 98765}]
files += [{"path": "model-%05d-of-00119.safetensors" % i, "size": 5300000000} for i in range(1, 120)]
files.append({"path": "draft/model.safetensors", "size": 5300000000 - 4321 - 98765})  # 636 GB in all
json.dump({"org/huge-model": {"revision": huge, "files": files},
           "org/gated-model": {"revision": gated, "gated": True, "root": root}}, open(out, "w"))
PY
(umask 077 && printf '%s\n' "$TOKEN" >"$HUB/hub_token")
python3 "$ROOT/tests/sim/hub_server.py" --repos "$HUB/repos.json" --dir "$HUB" --page-size 50 \
  </dev/null >"$HUB/server.out" 2>&1 &
BG_PIDS+=($!)
for _ in $(seq 100); do [[ -s $HUB/hub.port ]] && break; sleep 0.1; done
[[ -s $HUB/hub.port ]] || fail "the stand-in Hub did not start: $(cat "$HUB/server.out")"
HF_ENDPOINT=http://127.0.0.1:$(cat "$HUB/hub.port")
export HF_ENDPOINT
curl -sf "$HF_ENDPOINT/api/whoami-v2" >/dev/null && fail "whoami without a token answered"
curl -sf -H "Authorization: Bearer $TOKEN" "$HF_ENDPOINT/api/whoami-v2" >/dev/null ||
  fail "the stand-in Hub's token check refused its token"

step "one node; stores of 251 GB and 1.2 TB (tmpfs, nothing written), a hub CLI nowhere yet"
start_fleet 1
N=dgx1
U=$(node_field $N user)
H=$(getent passwd "$U" | cut -d: -f6)
PID=$(node_field $N pid)
for s in small:251000000000 big:1200000000000; do
  mkdir -p "$(node_root $N)/${s%%:*}"
  nsenter -t "$PID" -m -- mount -t tmpfs -o "size=${s#*:},mode=0777" tmpfs "/srv/${s%%:*}"
done
STORES=(--store 'small={"path": "/srv/small", "nodes": ["dgx1"]}' --store 'big={"path": "/srv/big", "nodes": ["dgx1"]}')
huge() { echo '{"repo": "org/huge-model", "revision": "'"$REV_HUGE"'", "store": "'"$1"'", "source": "hub"}'; }
G_SPEC='{"repo": "org/gated-model", "revision": "'$REV_G'", "store": "local", "source": "hub", "nodes": ["dgx1"]}'

step "plan: 636 GB onto a store with 251 GB free is refused with both figures"
mkrepo "${STORES[@]}" --model "huge=$(huge small)"
expect_rc 1 plan
expect_out "model.huge@small: needs 636 GB (sizes from the Hub's listing: 122 files, 636 GB)"
expect_out "251 GB free at /srv/small"
expect_out "a store that fits: big (1.2 TB free)"
grep -q "GET /api/models/org/huge-model/tree/$REV_HUGE?recursive=true&cursor=100 200" "$HUB/hub.log" ||
  fail "fleet did not follow the tree's pages: $(cat "$HUB/hub.log")"

step "onto a store with room it is planned, with its size (no byte of it exists)"
mkrepo "${STORES[@]}" --model "huge=$(huge big)"
expect_rc 2 plan --detailed-exitcode
expect_out "download org/huge-model@${REV_HUGE:0:12} from the hub on dgx1 (636 GB)"

step "two downloads onto one file system: the second counts the first's share"
mkrepo "${STORES[@]}" --model "huge=$(huge big)" --model "huge2=$(huge big)"
expect_rc 1 plan
expect_out "model.huge@big: needs 636 GB (sizes from the Hub's listing: 122 files, 636 GB) (636 GB for model.huge2@big in the same plan), store big (through dgx1) has 1.2 TB free at /srv/big"

step "a gated repo without the token: refused at plan time, naming the variable"
mkrepo --hub '{"token_env": "HF_TOKEN"}' --model "g=$G_SPEC"
expect_rc 1 plan
expect_out "model.g@dgx1: the Hub at $HF_ENDPOINT: org/gated-model@$REV_G: HTTP 401"
expect_out "export the Hub token in HF_TOKEN"
export HF_TOKEN=$TOKEN
expect_rc 2 plan --detailed-exitcode
expect_out "reason: sizes from the Hub's listing: 7 files, 1.6 MB: 1.6 MB to download, "

step "no hub CLI on the node: apply fails with a fix that works when followed"
expect_rc 1 apply --auto-approve
expect_out "\`hf\` is not installed on the node"
expect_out "$H/.local/bin/hf, /usr/local/bin/hf, PATH (/srv/bin:"
expect_out "uv tool install huggingface_hub"
[[ ! -d $(node_root $N)/hf/hub/$DG/blobs ]] || fail "something was downloaded without a CLI"
# The fix (uv tool install) puts hf in ~/.local/bin, not on the login's PATH.
# shellcheck disable=SC2016  # expanded on the node
on_node $N 'case ":$PATH:" in *":$HOME/.local/bin:"*) exit 1;; esac' ||
  fail "the node's login PATH has ~/.local/bin: the test would prove nothing"
install -d -o "$U" "$H/.local" "$H/.local/bin"
install -m 755 -o "$U" "$ROOT/tests/sim/hf" "$H/.local/bin/hf"

step "the download, with the token on stdin only: never in ps, logs, plan or state"
echo 0.4 >"$HUB/hub_delay"  # each file: ~3 s for the 7, time to look at ps
bg_apply
wait_output "$HUB/hub.log" "GET /org/gated-model/resolve/" 30
ps -eww -o pid,user,args >"$WORK/ps-args"
# The environment of the node's processes (the controller's own, here on
# the same host, holds HF_TOKEN: that is where the token lives).
ps -ww e -u "$U" -o pid,user,args >"$WORK/ps-env"
grep -q "fleet-hub-download" "$WORK/ps-args" || fail "no download running when ps was read"
# shellcheck disable=SC2154  # bg: set by bg_apply
wait "$bg" || { cat "$WORK/bg.out"; fail "apply failed"; }
cp "$WORK/bg.out" "$WORK/out"
rm -f "$HUB/hub_delay"
expect_out "the Hub lists 7 files"
grep -q "download org/gated-model@$REV_G endpoint=$HF_ENDPOINT token=HF_TOKEN_PATH" \
  "$(node_root $N)/sim/hf.log" || fail "the node's hf did not get the token file: $(cat "$(node_root $N)/sim/hf.log")"
grep -q "GET /org/gated-model/resolve/$REV_G/config.json 200 token" "$HUB/hub.log" ||
  fail "the download did not send the token to the Hub"
[[ -L $(node_root $N)/hf/hub/$DG/snapshots/$REV_G/config.json ]] || fail "no snapshot on the node"
cmp -s "$WORK/fixture/$DG/snapshots/$REV_G/model-00002-of-00003.safetensors" \
  "$(node_root $N)/hf/hub/$DG/snapshots/$REV_G/model-00002-of-00003.safetensors" || fail "a shard differs"
left=$(find /tmp -maxdepth 1 -name 'tmp.*' -user "$U" 2>/dev/null)
[[ -z $left ]] || fail "the token's folder was left behind: $left"
expect_rc 0 plan --json
for f in "$WORK/ps-args" "$WORK/ps-env" "$WORK/transcript" "$WORK/bg.out" "$(state_file)" \
  "$(node_root $N)/sim/hf.log" "$(node_root $N)/hf/hub/.fleet-download-$DG.log" "$HUB/hub.log"; do
  [[ -e $f ]] || fail "$f is missing"
  ! grep -qF -- "$TOKEN" "$f" || fail "the token is in $f"
done
assert_converged
! grep -qF -- "$TOKEN" "$WORK/transcript" "$(state_file)" || fail "the token is in the output"

step "a download that leaves a file out is incomplete against the Hub's listing"
rm -rf "$(node_root $N)/hf/hub/$DG"
# Under a new name: the state's record of g would be its reference.
mkrepo --hub '{"token_env": "HF_TOKEN"}' --model "g2=$G_SPEC"
echo config.json >"$(node_root $N)/sim/hf-skip"
expect_rc 1 apply --auto-approve
expect_out "still incomplete after the download (it exited 0): config.json"
rm -f "$(node_root $N)/sim/hf-skip"

step "a second real Hub client, npm's @huggingface/hub, as the node's hf: the same cache"
# Its snapshotDownload asks the Hub its own way (paths-info, ranged
# resolve/ requests) and writes the cache by its own code: fleet's
# completeness check and the stand-in Hub are held against both clients.
HFJS=$ROOT/tests/sim/hf-js
[[ -f $HFJS/node_modules/@huggingface/hub/package.json ]] ||
  fail "npm's @huggingface/hub is not in $HFJS/node_modules: bash scripts/install-deps.sh installs it"
rm -rf "$(node_root $N)/hf/hub/$DG"
ln -sf "$HFJS/hf.cjs" "$H/.local/bin/hf"
mkrepo --hub '{"token_env": "HF_TOKEN"}' --model "gjs=$G_SPEC"
expect_rc 0 apply --auto-approve
expect_out "the Hub lists 7 files"
grep -q "js download org/gated-model@$REV_G endpoint=$HF_ENDPOINT token=HF_TOKEN_PATH" \
  "$(node_root $N)/sim/hf.log" || fail "the download did not go through @huggingface/hub: $(tail -3 "$(node_root $N)/sim/hf.log")"
grep -q "POST /api/models/org/gated-model/paths-info/$REV_G 200 token" "$HUB/hub.log" ||
  fail "no paths-info request: the JS client did not do the download"
cmp -s "$WORK/fixture/$DG/snapshots/$REV_G/model-00002-of-00003.safetensors" \
  "$(node_root $N)/hf/hub/$DG/snapshots/$REV_G/model-00002-of-00003.safetensors" || fail "a shard differs"
assert_converged
for f in "$WORK/transcript" "$(state_file)" "$(node_root $N)/sim/hf.log" \
  "$(node_root $N)/hf/hub/.fleet-download-$DG.log"; do
  ! grep -qF -- "$TOKEN" "$f" || fail "the token is in $f"
done
install -m 755 -o "$U" "$ROOT/tests/sim/hf" "$H/.local/bin/hf.py" && mv -f "$H/.local/bin/hf.py" "$H/.local/bin/hf"

step "a Hub that does not answer: the plan says so; apply asks again before the download"
rm -rf "$(node_root $N)/hf/hub/$DG"
mkrepo --hub '{"token_env": "HF_TOKEN"}' --model "g3=$G_SPEC"
touch "$HUB/hub_down"
expect_rc 2 plan --detailed-exitcode
expect_out "size unknown: the Hub at $HF_ENDPOINT: org/gated-model@$REV_G: HTTP 503"
expect_out "apply asks the Hub again before the download"
rm -f "$HUB/hub_down"
expect_rc 0 apply --auto-approve
expect_out "the Hub lists 7 files"
assert_converged

step "a store that does not answer: an error naming it and the node; the rest is planned"
# A real hung mount on the node: tests/sim/hang_fs.py answers the kernel's
# FUSE INIT and nothing after, so every stat, statfs and readdir under
# /srv/dead blocks in the kernel, as on an NFS server gone away (and a
# fatal signal still ends the caller, as NFS's killable waits allow).
mkdir -p "$(node_root $N)/dead"
nsenter -t "$PID" -m -- /usr/bin/python3 "$ROOT/tests/sim/hang_fs.py" /srv/dead \
  </dev/null >"$WORK/hang_fs.out" 2>&1 &
HANG_FS=$!
BG_PIDS+=("$HANG_FS")
wait_output "$WORK/hang_fs.out" "mounted /srv/dead" 10
t0=$SECONDS
! on_node $N 'timeout 3 stat /srv/dead' >/dev/null 2>&1 || fail "/srv/dead answers: the case tests nothing"
((SECONDS - t0 >= 3)) || fail "stat of /srv/dead did not block"
mkrepo --hub '{"token_env": "HF_TOKEN"}' --store 'dead={"path": "/srv/dead", "nodes": ["dgx1"]}' \
  --model "g3=$G_SPEC" --model "huge=$(huge dead)"
t0=$SECONDS
expect_rc 1 plan --json
((SECONDS - t0 < 40)) || fail "the plan took $((SECONDS - t0)) s on a store that does not answer"
expect_out "model.huge@dead on dgx1: /srv/dead does not answer within 10 s (a hung network mount?)"
# The rest of the plan goes on: model g3 is diffed (converged) beside the error.
python3 -c 'import json,sys; p=json.load(open(sys.argv[1])); sys.exit(0 if any(c["address"] == "model.g3@dgx1" and c["action"] == "noop" for c in p["changes"]) else 1)' "$WORK/out" ||
  fail "the plan did not go on past the store that does not answer"

step "fleet watch keeps its rounds beside the hung store"
t0=$SECONDS
"$FLEET" -C "$REPO" --no-color watch --every 1s --rounds 3 --log "$WORK/hung-watch.jsonl" \
  >"$WORK/hung-watch.out" 2>&1 </dev/null || true
# Each round waits out the store's bounds (10 s for the model's probe, 10 s
# for the staged-copy inventory) and no more.
((SECONDS - t0 < 135)) || fail "3 watch rounds took $((SECONDS - t0)) s beside a hung store"
rounds=$(grep -c '"round"' "$WORK/hung-watch.jsonl" || true)
((rounds == 3)) || fail "the watch logged $rounds rounds, not 3: $(tail -5 "$WORK/hung-watch.out")"
echo "3 watch rounds beside the hung store in $((SECONDS - t0)) s"
kill "$HANG_FS" 2>/dev/null || true  # the connection aborts: waiters get ENOTCONN
nsenter -t "$PID" -m -- umount -l /srv/dead || true
echo "PASS"
