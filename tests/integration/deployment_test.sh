#!/usr/bin/env bash
# Deployments: real serving containers (busybox httpd in a real image pulled
# by digest from a real registry) under the nodes' real engine (rootless
# podman, or a dockerd per node with FLEET_TEST_ENGINE=docker) on simulated nodes,
# with a real model bound file by file.
# - apply pulls the image, stages the model, starts fleet-serve and waits for
#   its health URL; the container sees regular files only; then converged;
# - a recipe change replaces the container (the plan says what changed);
# - a replacement that exits, or never answers within health.timeout, fails
#   with its log lines, is removed, and the container it replaced serves again;
# - a container stopped by hand is started again;
# - a display RAM unlock stops the serve first and starts it again after,
#   also when only display_ram is targeted;
# - a renamed deployment waits for the old one to free its port;
# - a port taken by another process is a plan error;
# - a missing image is an error, never a pull;
# - a gpu_memory need above the node's free GPU memory (fake GB10 driver on
#   dgx2, read by fleet-probe) is a plan error with the arithmetic;
# - a deployment on two nodes: the head (rank 0) serves and is health-checked,
#   the worker runs with its rank and the head's address; a worker that died
#   restarts the group, the old head stopped before the worker starts again
#   (the engines' event times); two deployments on a node need shared: true;
# - a deployment the manifests drop is stopped and removed;
# - destroy stops the serve before restoring display RAM;
# - a token in the recipe env never appears in output, plan, or state.
# On docker (deployment_docker_test) the phases that do not exercise the
# engine are left out: the node lost, an unlock rolled back, a --target
# reload, a taken port, gpu_memory, a literal token (engine_free_phase in
# lib.sh; FLEET_TEST_FULL=1 runs them too).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/registry.sh"

PORT=$(free_port)
URL=http://127.0.0.1:$PORT
get() { curl -s --max-time 5 "$URL$1"; }
code() { curl -s -o /dev/null -w '%{http_code}' --max-time 5 "$URL/v1/models" || true; }
# greets TEXT: the serve answers /v1/greeting with TEXT within 10 s. After a
# failed replacement, fleet starts the container it replaced again without
# waiting for its health: its httpd may not listen yet when apply exits.
greets() {
  local _
  for _ in $(seq 50); do [[ $(get /v1/greeting) == "$1" ]] && return 0; sleep 0.2; done
  return 1
}
gone() {  # gone NODE CONTAINER: the engine says it does not exist (not: ssh failed)
  local rc=0
  ce_exists "$1" container "$2" || rc=$?
  [[ $rc == 1 ]] || fail "$2 on $1: '$CE container exists/inspect' exited $rc, expected 1 (gone)"
}
container() {  # container FORMAT: the engine's inspect of fleet-serve on dgx2
  on_node dgx2 "$CE container inspect --format '$1' fleet-serve" 2>/dev/null || true
}
TOKEN=hf_FleetDeployTestSecret0123456789abcd
export FLEET_TEST_HF_TOKEN=$TOKEN  # the recipe takes HF_TOKEN from here (from_env)
REV=$(printf 'fleet-deploy-test' | sha1sum | cut -c1-40)

# recipe VERSION [COMMAND]: the serving recipe. The default command lists
# what the container sees at /model (and its symlinks) under /v1/, then
# serves it with busybox httpd on {port}. The serves stop on SIGTERM as real
# engines do (a PID 1 without a handler ignores it: docker would wait 30 s).
recipe() {
  local version=$1 cmd=${2:-}
  [[ -n $cmd ]] || cmd='busybox mkdir -p /www/v1 && busybox ls /model > /www/v1/models && busybox find /model -type l > /www/v1/links && echo "$GREETING" > /www/v1/greeting && echo "$HF_TOKEN" | busybox sha256sum > /www/v1/token && echo "serve starting: $GREETING, token $HF_TOKEN" && { busybox httpd -f -p {port} -h /www & pid=$!; trap "kill $pid; exit 0" TERM; wait $pid; }'
  mkdir -p "$REPO/recipes"
  cat >"$REPO/recipes/serve.toml" <<TOML
model = ""
args = ["sh", "-c", $(python3 -c 'import json,sys; print(json.dumps(sys.argv[1]))' "$cmd")]
memory_limit = "256m"

[env]
GREETING = "hello $version"
HF_TOKEN = {from_env = "FLEET_TEST_HF_TOKEN"}
TOML
}
# repo [DEPLOYMENT-EXTRA-JSON] [MKREPO-ARGS...]
repo() {
  local extra=${1:-}
  shift || true
  mkrepo --image "bb={\"ref\": \"$R/fleet/serve@$D\", \"source\": \"registry\"}" \
    --model "m={\"repo\": \"org/tiny\", \"revision\": \"$REV\", \"store\": \"local\", \"source\": \"node:dgx1\"}" \
    --deployment "serve={\"recipe\": \"recipes/serve.toml\", \"nodes\": [\"dgx2\"], \"image\": \"bb\", \"model\": \"m\", \"port\": $PORT, \"health\": {\"path\": \"/v1/models\", \"timeout\": \"${HEALTH_TIMEOUT:-20s}\"}$extra}" \
    "$@"
}

step "registry, image, 2 nodes, a real model on dgx1"
registry_start
D=$(image_push fleet/serve v1)
R=$REGISTRY
start_fleet 2 --insecure-registry "$R" --gpu dgx2=gb10
python3 "$ROOT/tests/integration/mkmodel.py" --cache "$(node_root dgx1)/hf/hub" --repo org/tiny \
  --revision "$REV" --owner "$(node_field dgx1 user)" >/dev/null
repo
recipe v1

step "plan: pull, stage, start"
expect_rc 2 plan --detailed-exitcode
expect_out "deployment.serve@dgx2"
expect_out "start fleet-serve"
expect_no_out "$TOKEN"

step "apply: the serve answers, sees regular files only, runs without a pull"
expect_rc 0 apply --auto-approve
[[ $(code) == 200 ]] || fail "health $URL/v1/models answers $(code)"
get /v1/models | grep -q 'config.json' || fail "the container does not see the model: $(get /v1/models)"
[[ -z $(get /v1/links) ]] || fail "symlinks in the container: $(get /v1/links)"
[[ $(get /v1/greeting) == "hello v1" ]] || fail "env not passed: $(get /v1/greeting)"
[[ $(get /v1/token) == "$(echo "$TOKEN" | sha256sum)" ]] || fail "HF_TOKEN (from_env) did not reach the serve"
[[ $(container '{{index .Config.Labels "fleet.deployment"}}') == serve ]] || fail "no fleet.deployment label"
on_node dgx2 'test ! -e ~/.fleet/deployments/fleet-serve.env' || fail "the env file stayed on the node"
assert_converged
expect_rc 0 status
expect_out "fleet-serve"
expect_out "clients: http://127.0.0.1:$PORT"
expect_rc 0 logs deployment.serve@dgx2 --tail 5
expect_out "serve starting: hello v1, token (sensitive)"
expect_no_out "$TOKEN"
expect_rc 1 logs deployment.serve@dgx1
expect_out "no deployment deployment.serve@dgx1 in the manifests"

step "a recipe change replaces the container, and says what changed"
OLD_ID=$(container '{{.Id}}')
recipe v2
expect_rc 2 plan --detailed-exitcode
expect_out "replace fleet-serve"
expect_out "env changed (GREETING)"
expect_rc 0 apply --auto-approve
[[ $(get /v1/greeting) == "hello v2" ]] || fail "not replaced: $(get /v1/greeting)"
[[ $(container '{{.Id}}') != "$OLD_ID" ]] || fail "same container after replace"
gone dgx2 fleet-serve-previous
assert_converged

step "a replacement that exits fails with its log; the old one serves again"
recipe v3 'echo "engine: cannot allocate KV cache" >&2; exit 3'
expect_rc 1 apply --auto-approve
expect_out "exit code 3"
expect_out "cannot allocate KV cache"
expect_out "the container it replaced is back and started"
greets "hello v2" || fail "the previous container does not serve: $(get /v1/greeting)"

step "a replacement that never answers fails after health.timeout"
# A short timeout: this serve never answers, so the test would wait it out
# (the spec hash leaves the timeout out: the serving v2 is not replaced).
HEALTH_TIMEOUT=4s repo
recipe v4 'busybox sleep 600 & pid=$!; trap "kill $pid; exit 0" TERM; wait $pid'
expect_rc 1 apply --auto-approve
expect_out "did not answer 2xx within 4 s"
greets "hello v2" || fail "the previous container does not serve after a timeout: $(get /v1/greeting)"
recipe v2
repo
assert_converged

step "a serve stopped by hand is started again"
on_node dgx2 "$CE stop --time 1 fleet-serve" >/dev/null
expect_rc 2 plan --detailed-exitcode
expect_out "container is exited"
expect_rc 0 apply --auto-approve
[[ $(code) == 200 ]] || fail "not started again"
assert_converged

# A node lost (its SSH sessions cut, its power off) is fleet's SSH and
# executor at work, not the engine: on podman only (engine_free_phase).
if engine_free_phase; then
step "the node lost right after the serve answered: the apply fails naming it, then converges"
# The step's last command reads the started container's id for the state;
# the node lost there once let the apply end 0 (tests/faults/silent.sh). A
# stand-in for the engine CLI on dgx2 (/srv/bin, first on the node's PATH)
# holds that one command while the test cuts dgx2's SSH sessions, as a node
# going away would; every other command reaches the real CLI.
HOLD=$(node_root dgx2)/sim/id-read
engine_stand_in dgx2 "'container inspect --format {{.Id}} fleet-serve'" \
  ': >/srv/sim/id-read; sleep 20; exit 1'
rm -f "$HOLD"
on_node dgx2 "$CE stop --time 1 fleet-serve" >/dev/null
bg_apply
for _ in $(seq 600); do [[ -e $HOLD ]] && break; sleep 0.1; done
[[ -e $HOLD ]] || fail "the apply never read the container's id: $(cat "$WORK/bg.out")"
listener=$(cat "$SIMDIR/nodes/dgx2/sshd/sshd.pid")
for p in $(pgrep -P "$listener"); do
  kill -9 $(pgrep -P "$p" -x 'sshd|sshd-session') "$p" 2>/dev/null || true
done
rc=0
wait "$bg" || rc=$?
out=$(cat "$WORK/bg.out")
[[ $rc == 1 ]] || fail "the apply exited $rc with dgx2 lost after the health check: $out"
grep -q "deployment.serve@dgx2" <<<"$out" || fail "the failure does not name the step: $out"
grep -q "container inspect" <<<"$out" || fail "the failure does not name the command: $out"
grep -m1 "container inspect" <<<"$out"  # the error, in the test's log
engine_stand_in_off dgx2
rm -f "$HOLD"
expect_rc 0 apply --auto-approve
[[ $(code) == 200 ]] || fail "the serve does not answer after the re-apply"
assert_converged

step "the node losing power during the health wait fails the apply after the dark time, not after health.timeout"
# A replacement that never answers, with a 5 min health.timeout: the test
# cuts dgx2's power (every process killed, sshd too) while fleet waits.
# fleet gives up after 3 failed connects in a row over the dark time
# (DarkNode: FLEET_HEALTH_DARK_AFTER, 30 s by default; 6 s here, for time:
# the default is the unit test's).
HEALTH_TIMEOUT=5m repo
recipe v6 'busybox sleep 600 & pid=$!; trap "kill $pid; exit 0" TERM; wait $pid'
FLEET_HEALTH_DARK_AFTER=6s bg_apply
wait_output "$WORK/bg.out" "waiting for http://.*health.timeout 5 min" 120
# t0 before the crash: fleet's dark time may start before `crash` returns
# (it takes a second or two on a loaded machine).
t0=$SECONDS
"$SIM" crash "$SIMDIR" dgx2 >/dev/null
rc=0
wait "$bg" || rc=$?
out=$(cat "$WORK/bg.out")
[[ $rc == 1 ]] || fail "the apply exited $rc with dgx2 off during the health wait: $out"
# Not before the dark time (a lost poll or two is no dark node), and well
# before the default's 30 s: the knob was read (a dark node's connects are
# refused at once, and the polls 2 s apart).
((SECONDS - t0 >= 6)) || fail "the apply gave up on dgx2 $((SECONDS - t0)) s after it went dark, before 6 s"
((SECONDS - t0 < 25)) || fail "the apply took $((SECONDS - t0)) s to give up on a dark dgx2 (dark time 6 s)"
echo "the apply gave up $((SECONDS - t0)) s after dgx2 went dark"
grep -q "deployment.serve@dgx2.*the node stopped answering while" <<<"$out" ||
  fail "the failure does not say the node stopped answering: $out"
grep -m1 "the node stopped answering" <<<"$out"
"$SIM" node-start "$SIMDIR" dgx2 >/dev/null
recipe v2
repo
expect_rc 0 apply --auto-approve
greets "hello v2" || fail "the serve does not answer after the node came back: $(get /v1/greeting)"
assert_converged
fi

# The executor's rollback of an unlock beside a failed replacement, and a
# --target apply's choice of steps: on podman only. Their engine commands
# (stop for the reload, a failed replacement removed and the old one back,
# start after the reload) run on docker in the phases around them.
if engine_free_phase; then
step "a replacement failing in the same apply as an unlock: the unlock is rolled back, the old serve serves"
repo ', "display_ram": "unlocked"'
recipe v5 'echo "engine: CUDA out of memory" >&2; exit 4'
expect_rc 1 apply --auto-approve
expect_out "CUDA out of memory"
expect_out "undone (rolled back)"
expect_no_out "rollback failed"
[[ $(param dgx2 modeset)/$(param dgx2 fbdev) == N/Y ]] || fail "the unlock was not rolled back"
greets "hello v2" || fail "the previous serve does not serve after the rollback: $(get /v1/greeting)"
recipe v2
repo
assert_converged
fi

step "an unlock stops the serve for the reload and starts it after"
repo ', "display_ram": "unlocked"'
expect_rc 2 plan --detailed-exitcode
expect_out "stops the serving containers fleet-serve first"
expect_out "display_ram.dgx2 stops it for the nvidia_drm reload"
expect_rc 0 apply --auto-approve
[[ $(param dgx2 modeset)/$(param dgx2 fbdev) == Y/N ]] || fail "not unlocked"
[[ $(code) == 200 ]] || fail "serve not started again after the reload"
assert_converged

if engine_free_phase; then
step "a display RAM change alone (--target) starts the serve it stopped again"
repo
expect_rc 0 apply --auto-approve --target display_ram.dgx2
[[ $(param dgx2 modeset)/$(param dgx2 fbdev) == N/Y ]] || fail "not restored"
expect_out "started fleet-serve again"
for _ in $(seq 150); do [[ $(code) == 200 ]] && break; sleep 0.2; done
[[ $(code) == 200 ]] || fail "the serve stayed down after a targeted reload"
expect_rc 0 apply --auto-approve
repo ', "display_ram": "unlocked"'
expect_rc 0 apply --auto-approve
assert_converged
fi

step "a renamed deployment waits for the old one to free its port"
sed -i 's/^  serve: /  served: /' "$REPO/fleet.yaml"
expect_rc 2 plan --detailed-exitcode
expect_out "port $PORT is in use, by fleet-serve as it seems"
expect_rc 0 apply --auto-approve
[[ $(on_node dgx2 "$CE container inspect --format '{{.State.Status}}' fleet-served") == running ]] ||
  fail "fleet-served does not run"
gone dgx2 fleet-serve
[[ $(code) == 200 ]] || fail "the renamed serve does not answer"
assert_converged
repo ', "display_ram": "unlocked"'
expect_rc 0 apply --auto-approve
[[ $(code) == 200 ]] || fail "not serving after the rename back"

# The probe's port check and the plan's error, without the engine: on podman only.
if engine_free_phase; then
step "a port taken by another process is a plan error"
hold_port 0
TAKEN=$HELD_PORT
repo ', "display_ram": "unlocked", "shared": true'
python3 - "$REPO/fleet.yaml" "$TAKEN" <<'PY'
import sys
p, port = sys.argv[1], int(sys.argv[2])
s = open(p).read()
s += ('  other: {"recipe": "recipes/serve.toml", "nodes": ["dgx2"], "image": "bb", "model": "m", '
      '"port": %d, "shared": true}\n' % port)
open(p, "w").write(s)
PY
expect_rc 1 plan
expect_out "port $TAKEN on dgx2 is already in use"
release_port
fi
repo ', "display_ram": "unlocked"'

step "a missing image is an error, never a pull"
expect_rc 0 destroy --auto-approve --target deployment.serve@dgx2
gone dgx2 fleet-serve
# The need against the probe's GPU figures is the plan's, without the
# engine: on podman only.
if engine_free_phase; then
step "a gpu_memory need is checked against the node's free GPU memory"
repo ', "display_ram": "unlocked", "gpu_memory": "200GiB"'
expect_rc 1 plan
expect_out "deployment.serve@dgx2: gpu_memory does not fit on dgx2: needs 200.0 GiB"
expect_out "98.3 GiB free"

step "a GB10 full of page cache: a need within free + page cache is planned with the drop"
# A model just staged: 60 GiB of dgx2's 98.3 GiB is page cache, which the
# fake cuMemGetInfo (as GB10's) and the node's meminfo count as used.
"$SIM" page-cache "$SIMDIR" dgx2 $((60 << 30)) >/dev/null
repo ', "display_ram": "unlocked", "gpu_memory": "60GiB"'
expect_rc 2 plan --detailed-exitcode
expect_out "gpu_memory fits once the page cache is dropped: needs 60.0 GiB"
expect_out "38.3 GiB free"
expect_out "+ 60.0 GiB reclaimable page cache"
repo ', "display_ram": "unlocked", "gpu_memory": "100GiB"'
expect_rc 1 plan
expect_out "gpu_memory does not fit on dgx2: needs 100.0 GiB"
expect_out "short by 1.7 GiB even with the page cache dropped"
# A sudo that asks for the drop: a plan error naming the sudoers line.
sudoers=$(node_root dgx2)/etc/sudoers.d/fleet
cp "$sudoers" "$WORK/sudoers.bak"
sed -i 's|, /srv/bin/sysctl vm.drop_caches=3||' "$sudoers"
repo ', "display_ram": "unlocked", "gpu_memory": "60GiB"'
expect_rc 1 plan
expect_out "only once the page cache is dropped"
expect_out "NOPASSWD: /srv/bin/sysctl vm.drop_caches=3"
cat "$WORK/sudoers.bak" >"$sudoers"
on_node dgx2 ': >/srv/sim/sysctl.log'  # as the node user, who appends to it
expect_rc 0 apply --auto-approve
grep -qx "vm.drop_caches=3" "$(node_root dgx2)/sim/sysctl.log" ||
  fail "apply did not drop the page cache: $(cat "$(node_root dgx2)/sim/sysctl.log")"
grep -q "^Cached: *0 kB" "$(node_root dgx2)/sim/meminfo" || fail "page cache left: $(cat "$(node_root dgx2)/sim/meminfo")"
[[ $(code) == 200 ]] || fail "not serving after the drop"

step "the serve crashes on a GB10 full of page cache again: the heal drops it first"
"$SIM" page-cache "$SIMDIR" dgx2 $((60 << 30)) >/dev/null
on_node dgx2 ': >/srv/sim/sysctl.log'
# The engine crashes: its process killed (the recipe's shell then exits,
# and the container with it). A `podman kill` of this recipe's container
# left its backgrounded httpd running (reparented to conmon) and holding
# the port on this machine; a real engine is its container's main process.
pkill -KILL -f "^busybox httpd -f -p $PORT " || fail "no httpd to kill"
listening() {  # what listens on $PORT, as fleet's check reads it
  on_node dgx2 "cat /proc/net/tcp /proc/net/tcp6 2>/dev/null" |
    awk -v p="$(printf '%04X' "$PORT")" '$4 == "0A" { n = split($2, a, ":"); if (a[n] == p) print }'
}
for _ in $(seq 100); do [[ -z $(listening) ]] && break; sleep 0.1; done
[[ -z $(listening) ]] || fail "port $PORT still listened on 10 s after the crash: $(ss -ltnp "sport = :$PORT")"
"$FLEET" -C "$REPO" --no-color watch --heal --heal-wait 0s --every 1s --rounds 3 \
  --log "$WORK/heal.jsonl" deployment.serve@dgx2 >"$WORK/heal.out" 2>&1 </dev/null ||
  fail "fleet watch --heal failed: $(tail -20 "$WORK/heal.out")"
python3 -c 'import json, sys
sys.exit(0 if any(e.get("event") == "heal" and e.get("outcome") == "healed"
                  for e in map(json.loads, open(sys.argv[1]))) else 1)' "$WORK/heal.jsonl" ||
  fail "no heal: $(grep -v '"round"' "$WORK/heal.jsonl" | tail -5)"
grep -qx "vm.drop_caches=3" "$(node_root dgx2)/sim/sysctl.log" ||
  fail "the heal did not drop the page cache: $(tail -5 "$WORK/heal.jsonl")"
grep -q "^Cached: *0 kB" "$(node_root dgx2)/sim/meminfo" || fail "page cache left after the heal"
[[ $(code) == 200 ]] || fail "not serving after the heal"
expect_rc 0 destroy --auto-approve --target deployment.serve@dgx2
gone dgx2 fleet-serve
fi
repo ', "display_ram": "unlocked", "gpu_memory": "24GiB"'
expect_rc 2 plan --detailed-exitcode
expect_out "gpu_memory fits: needs 24.0 GiB"
expect_rc 0 plan -out "$WORK/saved.plan"
# by its ID: a pulled image carries fleet's tags too, and removing one name
# would only untag it
on_node dgx2 "$CE rmi -f \$($CE image inspect --format '{{.Id}}' $R/fleet/serve@$D)" >/dev/null
expect_rc 1 apply "$WORK/saved.plan"
expect_out "is not on the node; refusing to start fleet-serve"
ce_exists dgx2 image "$R/fleet/serve@$D" && fail "the image was pulled"
expect_rc 0 apply --auto-approve
[[ $(code) == 200 ]] || fail "not serving after the image was pulled again"
assert_converged

step "a deployment on two nodes: the head serves, the worker runs"
PORT2=$(free_port)
cat >"$REPO/recipes/pair.toml" <<'TOML'
model = ""
args = ["sh", "-c", "if [ {rank} = 0 ]; then busybox mkdir -p /www/v1 && echo 'head of {nnodes}' > /www/v1/models; busybox httpd -f -p {port} -h /www & pid=$!; else echo 'worker {rank} of {nnodes} joins {head}'; busybox sleep 100000 & pid=$!; fi; trap 'kill $pid; exit 0' TERM; wait $pid"]
TOML
# two deployments on dgx2: one serve per node unless both say shared
repo ', "display_ram": "unlocked"' \
  --deployment "pair={\"recipe\": \"recipes/pair.toml\", \"nodes\": [\"dgx1\", \"dgx2\"], \"image\": \"bb\", \"port\": $PORT2, \"health\": {\"path\": \"/v1/models\", \"timeout\": \"20s\"}}"
expect_rc 1 validate
expect_out "deployments 'serve'"
expect_out "and 'pair' both run on node 'dgx2'; a node serves one deployment at a time"
repo ', "display_ram": "unlocked", "shared": true' \
  --deployment "pair={\"recipe\": \"recipes/pair.toml\", \"nodes\": [\"dgx1\", \"dgx2\"], \"image\": \"bb\", \"port\": $PORT2, \"health\": {\"path\": \"/v1/models\", \"timeout\": \"20s\"}, \"shared\": true}"
expect_rc 2 plan --detailed-exitcode
expect_out "deployment.pair@dgx1"
expect_out "deployment.pair@dgx2"
expect_out 'rank = "1 of 2"'
expect_rc 0 apply --auto-approve
[[ $(curl -s --max-time 5 "http://127.0.0.1:$PORT2/v1/models") == "head of 2" ]] || fail "the head does not serve"
[[ $(on_node dgx2 "$CE container inspect --format '{{.State.Status}}' fleet-pair") == running ]] || fail "the worker does not run"
expect_rc 0 logs deployment.pair@dgx2
expect_out "worker 1 of 2 joins 127.0.0.1"
assert_converged
step "a worker that died restarts its group: the worker first, the head last"
HEAD_ID=$(on_node dgx1 "$CE container inspect --format '{{.Id}}' fleet-pair")
on_node dgx2 "$CE stop --time 1 fleet-pair" >/dev/null
expect_rc 2 plan --detailed-exitcode
expect_out "restart fleet-pair with its group"
expect_out "the rank on dgx2 is exited"
# The order from the engines' own event logs on both nodes (one clock: the
# nodes share the machine's), read after the apply: the old head's process
# ended (its stop or died event) before the worker was started again (its first
# start event since the apply began), i.e. the old head is stopped first and
# the head starts last. A poll of each node's running containers every 50
# ms during the apply did this before: a curl or a CLI start a sample (on
# docker back to back, two cores' worth beside the apply it watched), for
# times the engine records itself to the nanosecond.
t_apply=$(date +%s.%N)
expect_rc 0 apply --auto-approve
t_end=$(date +%s.%N)
for n in dgx1 dgx2; do
  case $(node_field $n engine) in
    podman) on_node $n "podman events --stream=false --filter container=fleet-pair --format json" ;;
    *) on_node $n "docker events --since $t_apply --until $t_end --filter container=fleet-pair --format '{{json .}}'" ;;
  esac >"$WORK/events.$n" || fail "the container events on $n: $(cat "$WORK/events.$n")"
done
python3 - "$WORK/events.dgx1" "$WORK/events.dgx2" "$HEAD_ID" "$t_apply" <<'PY' || fail "group restart order (events): see above"
import datetime, json, re, sys
def events(path, since_ns):
    """(ns, action, id) of each container event at or after since_ns:
    podman's JSON (Status, RFC 3339 Time) or docker's (Action, timeNano)."""
    out = []
    for line in open(path):
        if not line.strip():
            continue
        e = json.loads(line)
        if "timeNano" in e:
            ns, action, cid = int(e["timeNano"]), e.get("Action") or e.get("status"), e.get("id", "")
        else:
            m = re.match(r"(.*T\d\d:\d\d:\d\d)(?:\.(\d+))?(Z|[+-]\d\d:\d\d)$", e["Time"])
            tz = "+00:00" if m.group(3) == "Z" else m.group(3)
            secs = int(datetime.datetime.fromisoformat(m.group(1) + tz).timestamp())
            ns = secs * 10**9 + int((m.group(2) or "0").ljust(9, "0")[:9])
            action, cid = e["Status"], e["ID"]
        if ns >= since_ns:
            out.append((ns, action, cid))
    return out
since = int(sys.argv[4].replace(".", "")[:19].ljust(19, "0"))
head, worker, old_head = events(sys.argv[1], since), events(sys.argv[2], since), sys.argv[3]
# Each of these is recorded once the process is gone (a stop returns only
# then; podman may record died later, from conmon's clean-up): the first
# is the latest the old head can have ended.
old_end = min((t for t, a, i in head if a in ("died", "die", "stop") and i == old_head), default=None)
assert not [t for t, a, i in head if a in ("start", "restart", "unpause") and i == old_head], (
    "the old head was started again", head)
worker_first = min((t for t, a, i in worker if a == "start"), default=None)
assert old_end is not None and worker_first is not None, ("no died event of the old head or no start of the worker",
                                                          head, worker)
print("   events %d/%d: the old head's process ended %.2f s before the worker started again"
      % (len(head), len(worker), (worker_first - old_end) / 1e9))
assert old_end < worker_first, "the old head still ran %.2f s after the worker started" % (
    (old_end - worker_first) / 1e9)
PY
[[ $(on_node dgx1 "$CE container inspect --format '{{.Id}}' fleet-pair") != "$HEAD_ID" ]] ||
  fail "the head was not restarted with its group"
[[ $(on_node dgx2 "$CE container inspect --format '{{.State.Status}}' fleet-pair") == running ]] || fail "the worker does not run"
[[ $(curl -s --max-time 5 "http://127.0.0.1:$PORT2/v1/models") == "head of 2" ]] || fail "the head does not serve after the group restart"
assert_converged
repo ', "display_ram": "unlocked"'
expect_rc 0 apply --auto-approve
gone dgx1 fleet-pair
gone dgx2 fleet-pair

step "a deployment the manifests drop is stopped and removed"
mkrepo --unlock dgx2 --image "bb={\"ref\": \"$R/fleet/serve@$D\", \"source\": \"registry\", \"nodes\": [\"dgx2\"]}"
expect_rc 2 plan --detailed-exitcode
expect_out "the manifests no longer declare it"
# First with an engine that cannot answer the removal's inspect (a docker
# daemon gone, podman's storage broken): not "already gone". The step fails
# with the engine's words and the state keeps the serve (fleet once dropped
# it and left the container running).
engine_stand_in dgx2 "'container inspect fleet-serve'" "$ENGINE_DOWN"
expect_rc 1 apply --auto-approve
expect_out "storage is locked (fleet test)"
engine_stand_in_off dgx2
[[ $(container '{{.State.Status}}') == running ]] || fail "the serve stopped though its removal failed"
grep -q fleet-serve "$(state_file)" || fail "the state dropped the serve its removal did not remove"
expect_rc 2 plan --detailed-exitcode
expect_out "the manifests no longer declare it"
expect_rc 0 apply --auto-approve
gone dgx2 fleet-serve
assert_converged

step "destroy stops the serve, then restores display RAM"
repo ', "display_ram": "unlocked"'
expect_rc 0 apply --auto-approve
[[ $(code) == 200 ]] || fail "not serving"
expect_rc 0 destroy --auto-approve
gone dgx2 fleet-serve
[[ $(param dgx2 modeset)/$(param dgx2 fbdev) == N/Y ]] || fail "display RAM not restored"
[[ $(code) != 200 ]] || fail "still serving after destroy"

# validate's and plan's errors, without the engine: on podman only.
if engine_free_phase; then
step "a literal token in a recipe is refused; an unset from_env variable is a plan error"
cp "$REPO/recipes/serve.toml" "$WORK/serve.toml"
printf '[env]\nHF_TOKEN = "%s"\n' "$TOKEN" >"$REPO/recipes/serve.toml"
expect_rc 1 validate
expect_out "recipes/serve.toml:2:12: error: env 'HF_TOKEN' holds what looks like a token"
cp "$WORK/serve.toml" "$REPO/recipes/serve.toml"
(unset FLEET_TEST_HF_TOKEN; fl plan) && fail "plan without FLEET_TEST_HF_TOKEN succeeded"
expect_out "env HF_TOKEN comes from \$FLEET_TEST_HF_TOKEN on the controller (from_env), which is not set"
fi

step "the token never reached output, a plan or the state"
for f in "$WORK/transcript" "$WORK/saved.plan" "$(state_file)" "$(state_file).backup"; do
  [[ -f $f ]] || continue
  ! grep -qF "$TOKEN" "$f" || fail "token in $f"
done
no_crash
# DEPLOY_TEST_TRANSCRIPT=FILE keeps every word fleet said.
[[ -z ${DEPLOY_TEST_TRANSCRIPT:-} ]] || cp "$WORK/transcript" "$DEPLOY_TEST_TRANSCRIPT"
echo "PASS"
