# shellcheck shell=bash
# Shared set-up for the fault-injection tests (tests/faults/*.sh): one
# simulated fleet with a long apply on it, and a harness that runs TRIALS
# trials of a fault at random moments and checks the invariants of issue 14
# after each one. Source it from a fault script; see tests/faults/README.md.
#
# The scene (3 nodes, a real registry; their engine FAULT_ENGINE: podman,
# the default, docker, or mixed: docker, podman, docker):
#   dgx1 holds image bb (busybox + a random payload) and model m (real
#   safetensors shards); "up" wants bb on dgx1..dgx3 (copied node to node
#   through the controller), m staged on dgx2 and dgx3 from dgx1, display RAM
#   unlocked on dgx2 (each modprobe there takes FAULT_MODPROBE_DELAY s: a
#   module reload long enough to hit) and a serve on dgx2 using bb and m;
#   "down" wants none of it (applied with --purge).
# A trial: reset to down, start the up apply, inject the fault at a random
# moment or at an event (a copy, a staging, a reload, a container start on a
# node), then check:
#   - the state parses, lost nothing it held, and holds every step fleet
#     printed as complete; display RAM not at its default is recorded;
#   - a re-apply succeeds at once (FAULT_RETRIES, default 0, allows that
#     many more tries 3 s apart: before the controller-side takeover, a
#     killed controller's staging lock could block a re-apply for a keeper
#     heartbeat) and leaves one container, one image, the model's blobs
#     once, no .incomplete file, no staging lock;
#   - plan is then empty and a second apply changes nothing (assert_converged).
export FLEET_TEST_ENGINE=${FAULT_ENGINE:-${FLEET_TEST_ENGINE:-podman}}
source "$(dirname "${BASH_SOURCE[0]}")/../integration/lib.sh"
source "$ROOT/tests/integration/registry.sh"

TRIALS=${TRIALS:-3}
FAULT_SEED=${FAULT_SEED:-$SRANDOM}
RANDOM=$FAULT_SEED
FAULT_IMAGE_MB=${FAULT_IMAGE_MB:-24}
FAULT_MODEL_SHARDS=${FAULT_MODEL_SHARDS:-4}
FAULT_MODEL_KB=${FAULT_MODEL_KB:-4096}
FAULT_MODPROBE_DELAY=${FAULT_MODPROBE_DELAY:-0.6}
FAULT_RETRIES=${FAULT_RETRIES:-0}
FAULT_APPLY_LIMIT=${FAULT_APPLY_LIMIT:-240}  # seconds an apply may take before it counts as hung
# Each node's HF cache and image storage on a tmpfs of this size (fleet-sim
# --disk), which disk.sh fills; "" (the default but for disk.sh and
# faults_test) keeps them on the host's disk.
FAULT_DISK_SIZE=${FAULT_DISK_SIZE-}
REV=$(printf 'fleet-fault-test' | sha1sum | cut -c1-40)
MODEL_DIR=models--org--tiny
TARGETS=(dgx2 dgx3)

# ---------------------------------------------------------------- the scene

# shellcheck disable=SC2120 # the options are for a trial script that needs them
scene_start() {  # scene_start [fleet-sim start options]
  registry_start
  D=$(image_push fleet/serve v1 "$FAULT_IMAGE_MB")
  R=$REGISTRY
  PORT=$(free_port)
  start_fleet 3 --insecure-registry "$R" ${FAULT_DISK_SIZE:+--disk "$FAULT_DISK_SIZE"} "$@"
  local n
  for n in dgx1 dgx2 dgx3; do NODE_UID[$n]=$(id -u "$(node_field "$n" user)"); done
  ce dgx1 pull -q "$R/fleet/serve@$D" >/dev/null || fail "pull on dgx1"
  python3 "$ROOT/tests/integration/mkmodel.py" --cache "$(node_root dgx1)/hf/hub" --repo org/tiny \
    --revision "$REV" --shards "$FAULT_MODEL_SHARDS" --shard-kb "$FAULT_MODEL_KB" \
    --owner "$(node_field dgx1 user)" >/dev/null
  echo "$FAULT_MODPROBE_DELAY" >"$(node_root dgx2)/sim/modprobe-delay"
  mkdir -p "$REPO/recipes"
  # A serve that stops on SIGTERM, as real engines do.
  cat >"$REPO/recipes/serve.toml" <<'TOML'
model = ""
args = ["sh", "-c", "busybox mkdir -p /www/v1 && busybox ls /model > /www/v1/models && { busybox httpd -f -p {port} -h /www & pid=$!; trap \"kill $pid; exit 0\" TERM; wait $pid; }"]
memory_limit = "256m"
TOML
}

repo_up() {
  mkrepo --unlock dgx2 \
    --image "bb={\"ref\": \"$R/fleet/serve@$D\", \"source\": \"peers\", \"nodes\": [\"dgx1\", \"dgx2\", \"dgx3\"]}" \
    --model "m={\"repo\": \"org/tiny\", \"revision\": \"$REV\", \"store\": \"local\", \"source\": \"node:dgx1\", \"nodes\": [\"dgx2\", \"dgx3\"]}" \
    --deployment "serve={\"recipe\": \"recipes/serve.toml\", \"nodes\": [\"dgx2\"], \"image\": \"bb\", \"model\": \"m\", \"port\": $PORT, \"health\": {\"path\": \"/v1/models\", \"timeout\": \"60s\"}}"
}
repo_down() { mkrepo; }

# Down, then the targets wiped of what a previous trial left (the state has
# no record of it after a converged --purge), so every up apply copies,
# stages, reloads and starts.
scene_reset() {
  repo_down
  # (Not the property under test: the reset may retry.)
  FAULT_RETRIES=3 apply_retrying --purge || fail "reset: apply --purge of the down manifests failed: $RETRY_WHY"
  local n pids=()
  for n in "${TARGETS[@]}"; do
    on_node "$n" "$(wipe_engine_cmd "$n")" >"$WORK/wipe.$n" 2>&1 &
    pids+=($!)
  done
  wait "${pids[@]}"
  for n in "${TARGETS[@]}"; do
    # A target left with the image would skip the copy the fault aims at.
    [[ $(cat "$WORK/wipe.$n") == "0 0" ]] ||
      fail "reset: $n still has containers and images (ps, images): $(head -c 200 "$WORK/wipe.$n")"
    rm -rf "$(node_root "$n")/hf/hub/$MODEL_DIR" "$(node_root "$n")/hf/hub"/.fleet-staging-*
  done
  repo_up
}

# wipe_engine_cmd NODE: a node command removing every container and image
# of the node's engine (docker has no `rm -a`), then printing how many of
# each are left ("0 0").
wipe_engine_cmd() {
  local e left
  e=$(node_field "$1" engine)
  left="echo \$($e ps -aq | wc -l) \$($e images -aq | wc -l)"
  [[ $e == podman ]] && { echo "podman rm -af >/dev/null 2>&1; podman rmi -af >/dev/null 2>&1; $left"; return; }
  echo "c=\$($e ps -aq); [ -z \"\$c\" ] || $e rm -f \$c >/dev/null 2>&1;" \
    "i=\$($e images -aq | sort -u); [ -z \"\$i\" ] || $e rmi -f \$i >/dev/null 2>&1; $left"
}

# apply_retrying [ARGS...]: fleet apply --auto-approve, tried again up to
# FAULT_RETRIES times 3 s apart. Sets RETRIES (the tries beyond the first)
# and RETRY_WHY (the last failure's first error line).
apply_retrying() {
  local i
  for ((i = 0; ; i++)); do
    RETRIES=$i
    fl apply --auto-approve "$@" && return 0
    RETRY_WHY=$(grep -h -m1 -E '^Error|rror:' "$WORK/out" "$WORK/err" | head -1 | cut -c1-160)
    ((i < FAULT_RETRIES)) || return 1
    sleep 3
  done
}

# ---------------------------------------------------------------- observing nodes

# NODE_UID[NODE]: the node user's uid, looked up once (scene_start, or
# node_runs's first call in a shell): the event polls below run node_runs
# every 20 ms, and a node_field and an `id` in each were most of a poll's
# process starts.
declare -A NODE_UID=()
# node_runs NODE REGEX: a process of the node's user whose command line matches
node_runs() {
  [[ -n ${NODE_UID[$1]-} ]] || NODE_UID[$1]=$(id -u "$(node_field "$1" user)")
  pgrep -u "${NODE_UID[$1]}" -f "$2" >/dev/null
}
display_default() {  # display_default NODE: nvidia_drm loaded with modeset=N fbdev=Y
  local p
  p="$(node_root "$1")/sys/module/nvidia_drm/parameters"
  [[ -d $p && $(cat "$p/modeset") == N && $(cat "$p/fbdev") == Y ]]
}
incomplete_on() { find "$(node_root "$1")/hf/hub" -name '*.incomplete' 2>/dev/null | grep -q .; }

# The events a fault waits for; each prints the node it happened on. A step
# runs from its "ADDR: Creating..." line (fleet flushes each line) to its
# "ADDR: complete" line; the node-side process or file is seen sooner when
# it is there (polling sees a short copy's .incomplete file only by luck).
step_running() {  # step_running ADDR-REGEX: prints the node of a step begun, not ended
  local a
  a=$(grep -oE "^($1): (Creating|Modifying|Replacing)" "$WORK/apply.log" | cut -d: -f1) || return 1
  for a in $a; do
    grep -qF "$a: complete" "$WORK/apply.log" || { echo "${a##*[.@]}"; return 0; }
  done
  return 1
}
event_image() {
  local n
  for n in "${TARGETS[@]}"; do node_runs "$n" '(podman|docker) load' && { echo "$n"; return 0; }; done
  step_running 'image\.bb@dgx[23]'
}
event_stage() {
  local n
  for n in "${TARGETS[@]}"; do incomplete_on "$n" && { echo "$n"; return 0; }; done
  step_running 'model\.m@dgx[23]'
}
event_copy() { event_image || event_stage; }
event_reload() { node_runs dgx2 'srv/bin/modprobe' && echo dgx2; }
event_start() { node_runs dgx2 '(podman|docker) (run|start)' && echo dgx2 || step_running 'deployment\.serve@dgx2'; }

# wait_event NAME PID: polls until the event (prints its node) or until the
# apply PID ends (returns 1: the moment was missed).
wait_event() {
  local ev=$1 pid=$2 node
  while kill -0 "$pid" 2>/dev/null; do
    if node=$("event_$ev"); then
      echo "$node"
      return 0
    fi
    nap 0.02
  done
  return 1
}

# apply_alive: the apply under test is still running (a zombie, ended but
# not yet reaped, is not: kill -0 succeeds on it).
apply_alive() {
  local st
  st=$(awk '{print $3}' "/proc/$APPLY_PID/stat" 2>/dev/null) && [[ $st != Z ]]
}

# unlanded WHY: this trial's fault did not land (the event never came, the
# apply had ended, no session to cut): the trial proves nothing about the
# fault. run_trials runs another in its place and counts it apart.
unlanded() {
  note "UNLANDED($*)"
  : >"$WORK/unlanded"
}

# wait_apply PID LIMIT: waits for the apply to end; 124 if it is still
# running after LIMIT seconds (then it is killed: a hang).
wait_apply() {
  local pid=$1 limit=$2 t=0 rc=0
  while kill -0 "$pid" 2>/dev/null; do
    if ((t >= limit * 10)); then
      pkill -9 -P "$pid" 2>/dev/null  # a wrapper's child (APPLY_WRAP: strace) too
      kill -9 "$pid" 2>/dev/null
      wait "$pid" 2>/dev/null
      return 124
    fi
    nap 0.1
    t=$((t + 1))
  done
  wait "$pid" || rc=$?
  return "$rc"
}

# session_pids NODE: the node's per-connection sshd processes: each child of
# the listening sshd ("sshd: USER [priv]") and its sshd child that carries
# the connection ("sshd: USER@notty"); not the commands they run.
session_pids() {
  local listener p
  listener=$(cat "$SIMDIR/nodes/$1/sshd/sshd.pid")
  for p in $(pgrep -P "$listener"); do
    echo "$p"
    pgrep -P "$p" -x 'sshd|sshd-session' || true  # OpenSSH 9.8 renamed it
  done
}

# ---------------------------------------------------------------- checks

# check_apply_outcome RC NODE: an apply hit by a fault on NODE ended by
# itself, and either succeeded (the step was retried, or was done already)
# or failed with exit 1 naming the node, without crashing.
check_apply_outcome() {
  local rc=$1 node=$2
  [[ $rc != 124 ]] || fail "the apply hung: still running after ${FAULT_APPLY_LIMIT} s"
  ! grep -qE 'terminate called|Segmentation|Aborted|internal error|what\(\)' "$WORK/apply.log" ||
    fail "the apply crashed"
  note "apply-rc=$rc"
  [[ $rc == 0 || $rc == 1 ]] || fail "the apply exited $rc"
  if [[ $rc == 1 && -n $node ]]; then
    grep -E '^Error' "$WORK/apply.log" | grep -q "$node" ||
      fail "the apply failed without an error naming $node"
  fi
}

# check_state_after_fault LOG: what the fault left in the state (see the top).
check_state_after_fault() {
  local log=$1 unlocked=() errs
  display_default dgx2 || unlocked=(--unlocked dgx2)
  errs=$(python3 "$ROOT/tests/faults/state_check.py" "$(state_file)" --before "$WORK/state.before" \
    --log "$log" "${unlocked[@]}") || fail "after the fault: ${errs//$'\n'/; }"
}

# staging_lock_gone NODE: no staging lock on the node, or none after
# FAULT_LOCK_GRACE s. The killed controller's keeper holds its lock until its
# next heartbeat fails (<= 1 s; it was 5 s), and a re-apply that finds the
# files complete only verifies and records them, without the lock: done
# within that heartbeat, it would see the dying keeper's lock (CI, seed
# 3361281603, kill at 6187 ms). A lock still there after the grace (a few
# heartbeats, for a loaded machine) is a leftover.
FAULT_LOCK_GRACE=${FAULT_LOCK_GRACE:-5}
staging_lock_gone() {
  local hub t0=$EPOCHREALTIME
  hub="$(node_root "$1")/hf/hub"
  while ls -d "$hub"/.fleet-staging-* >/dev/null 2>&1; do
    awk -v a="$t0" -v b="$EPOCHREALTIME" -v g="$FAULT_LOCK_GRACE" 'BEGIN{exit !(b-a < g)}' || return 1
    sleep 0.5
  done
  awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN{exit !(b-a >= 0.5)}' &&
    note "$1-lock-gone-after=$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN{printf "%.1fs", b-a}')"
  return 0
}

# check_clean: after a successful re-apply of up: no duplicate, no leftover.
check_clean() {
  local n e counts blobs src errs
  src=$(ls "$(node_root dgx1)/hf/hub/$MODEL_DIR/blobs" | sort | tr '\n' ' ')
  for n in "${TARGETS[@]}"; do
    # one round trip per node: fleet containers, distinct images
    e=$(node_field "$n" engine)
    counts=$(on_node "$n" "echo \$($e ps -aq --filter label=fleet.deployment | wc -l) \$($e images -q --no-trunc | sort -u | wc -l)") ||
      fail "$n: cannot list containers and images"
    [[ $n == dgx2 && ${counts% *} == 1 || $n != dgx2 && ${counts% *} == 0 ]] ||
      fail "$n has ${counts% *} fleet containers"
    [[ ${counts#* } == 1 ]] || fail "$n has ${counts#* } images, expected 1"
    blobs=$(ls -A "$(node_root "$n")/hf/hub/$MODEL_DIR/blobs" | sort | tr '\n' ' ')
    [[ $blobs == "$src" ]] || fail "$n's blobs differ from the source's: $blobs"
    ! incomplete_on "$n" || fail "$n has .incomplete files left"
    staging_lock_gone "$n" || fail "$n has a staging lock left ${FAULT_LOCK_GRACE}s after the re-apply"
  done
  [[ $(param dgx2 modeset) == Y && $(param dgx2 fbdev) == N ]] || fail "dgx2 not unlocked after the re-apply"
  # A serve fleet started must be in the state: a plan that merely notes an
  # unrecorded, matching serve ("fleet state adopt takes it over") converges
  # but has lost it (a later drop from the manifests leaves it running).
  # The same for an image copied or a model staged (FAULT_STRICT_RECORDS=0
  # skips it): killed between the copy and the save, the re-apply found the
  # copied image complete and did not record it, so a later --purge left it
  # (fixed: fleet records a copy before it starts; copy_record_test).
  local strict=()
  [[ ${FAULT_STRICT_RECORDS:-1} == 0 ]] || strict=(--has image.bb@dgx2 --has model.m@dgx2)
  errs=$(python3 "$ROOT/tests/faults/state_check.py" "$(state_file)" --unlocked dgx2 \
    --has deployment.serve@dgx2 "${strict[@]}") ||
    fail "after the re-apply: ${errs//$'\n'/; }"
}

# power_back_and_recover [NODE]: after a power fault, NODE (if one lost
# power) boots again; then what the fault left is checked and the re-apply
# must converge.
power_back_and_recover() {
  if [[ -n ${1-} ]]; then
    "$SIM" node-start "$SIMDIR" "$1" >/dev/null 2>&1 || fail "fleet-sim node-start $1"
  fi
  check_state_after_fault "$WORK/apply.log"
  recover_and_check
}

# recover_and_check: the re-apply, then no leftover, then converged.
recover_and_check() {
  apply_retrying || fail "the re-apply failed (retries: $RETRIES of FAULT_RETRIES=$FAULT_RETRIES): $RETRY_WHY"
  [[ $RETRIES == 0 ]] || note "re-apply-retries=$RETRIES ($RETRY_WHY)"
  # A dead controller's staging lock whose keeper still ran, taken over at once.
  grep -q "its fleet process (.*) is gone" "$WORK/out" && note "took-over-lock"
  check_clean
  assert_converged
}

# ---------------------------------------------------------------- the harness

# The apply under test, in the background: APPLY_PID, output in $WORK/apply.log.
# APPLY_WRAP: a command it runs under (concurrent: strace); empty by default.
APPLY_WRAP=()
start_up_apply() {
  cp "$(state_file)" "$WORK/state.before" 2>/dev/null || rm -f "$WORK/state.before"
  # The redirection below truncates in the background child: until then an
  # event's first poll would read the last trial's log (a step begun there
  # and never completed fires at once).
  rm -f "$WORK/apply.log"
  "${APPLY_WRAP[@]}" "$FLEET" -C "$REPO" --no-color apply --auto-approve "$@" >"$WORK/apply.log" 2>&1 </dev/null &
  APPLY_PID=$!
}

# random_ms MAX_MS: sets REPLY to a random whole number of ms in [0, MAX_MS).
# Not through $(...): bash reseeds RANDOM in every subshell, and the trial's
# seed (run_trials) would not replay it.
random_ms() { REPLY=$(((RANDOM * 32768 + RANDOM) % $1)); }
sleep_ms() { sleep "$(awk -v m="$1" 'BEGIN{printf "%.3f", m/1000}')"; }
# random_pause MAX_MS: sleeps a random_ms MAX_MS; REPLY holds how long.
random_pause() {
  random_ms "$1"
  sleep_ms "$REPLY"
}

# calibrate: one whole up apply, timed (UP_MS: how long a random moment may
# be; 8 s when not calibrated)
UP_MS=${UP_MS:-8000}
calibrate() {
  scene_reset
  local t0=$EPOCHREALTIME
  fl apply --auto-approve || fail "calibration: the up apply failed"
  UP_MS=$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN{printf "%d", (b-a)*1000}')
  check_clean
  assert_converged
  step "calibrated: an up apply takes ${UP_MS} ms"
}

# run_trials FAULT FUNC: TRIALS trials of FUNC (a function of the trial
# number, run in a subshell: `fail` ends the trial, not the script). FUNC
# may set NOTE (appended to the trial's line) through $WORK/note. A trial
# whose fault did not land (FUNC called `unlanded`) and that passed is not
# counted: another runs in its place, up to FAULT_UNLANDED_MAX of them (a
# third of TRIALS, at least 3), then the run fails. Each attempt seeds
# RANDOM with FAULT_SEED + its number, so FAULT_SEED replays the choices.
# Prints one line per trial and the summary line
#   FAULT trials=N passed=P unlanded=U seed=S left=<what failing trials left, or ->
# and returns 1 if a trial failed or too many did not land.
run_trials() {
  local fault=$1 fn=$2 n=0 attempt=0 passed=0 unl=0 left=() t0 line
  local max_unl=${FAULT_UNLANDED_MAX:-$((TRIALS / 3 > 3 ? TRIALS / 3 : 3))}
  while ((n < TRIALS)); do
    attempt=$((attempt + 1))
    t0=$SECONDS
    : >"$WORK/note"
    rm -f "$WORK/out" "$WORK/err" "$WORK/unlanded"
    if (RANDOM=$((FAULT_SEED + attempt)); "$fn" "$((n + 1))") >"$WORK/trial.log" 2>&1; then
      if [[ -e $WORK/unlanded ]]; then
        unl=$((unl + 1))
        echo "$fault trial $((n + 1)): not counted $(cat "$WORK/note")($((SECONDS - t0)) s)"
        if ((unl > max_unl)); then
          left+=("the fault did not land in $unl trials (FAULT_UNLANDED_MAX $max_unl)")
          break
        fi
        continue
      fi
      n=$((n + 1))
      passed=$((passed + 1))
      echo "$fault trial $n: ok $(cat "$WORK/note") ($((SECONDS - t0)) s)"
      [[ -z ${FAULT_KEEP_LOGS-} ]] || { mkdir -p "$FAULT_KEEP_LOGS"; cp "$WORK/apply.log" "$FAULT_KEEP_LOGS/$fault-trial$n.apply.log"; cp "$WORK/trial.log" "$FAULT_KEEP_LOGS/$fault-trial$n.log"; }
    else
      n=$((n + 1))
      line=$(grep -m1 '^FAIL: ' "$WORK/trial.log" | cut -c7- | cut -c1-200) || true
      left+=("trial $n: ${line:-exited without FAIL line} $(cat "$WORK/note")")
      echo "$fault trial $n: FAILED $(cat "$WORK/note"): ${line:-see log} ($((SECONDS - t0)) s)"
      repair_after_failure >>"$WORK/trial.log" 2>&1 || true
      if [[ -n ${FAULT_LOG_DIR-} ]]; then
        mkdir -p "$FAULT_LOG_DIR"
        cp "$WORK/trial.log" "$FAULT_LOG_DIR/$fault-trial$n.log"
        cp "$WORK/apply.log" "$FAULT_LOG_DIR/$fault-trial$n.apply.log" 2>/dev/null || true
      else
        sed 's/^/    | /' "$WORK/trial.log" | tail -40
      fi
    fi
  done
  local IFS='|'
  echo "FAULT $fault trials=$TRIALS passed=$passed unlanded=$unl seed=$FAULT_SEED left=${left[*]:--}"
  ((passed == TRIALS))
}
note() { printf '%s ' "$*" >>"$WORK/note"; }

# After a failed trial, so that the next one starts from a fleet the state
# knows: a serve left running unrecorded is adopted (it matches "up").
repair_after_failure() {
  local n
  for n in "${TARGETS[@]}"; do  # a stalled trial may have left stopped sessions
    # shellcheck disable=SC2046 # one word per pid
    kill -CONT $(session_pids "$n") 2>/dev/null || true
    "$SIM" disk-free "$SIMDIR" "$n" 2>/dev/null || true  # a disk.sh trial's filler
  done
  repo_up
  fl state adopt deployment.serve@dgx2 || true
}

# fault_main FAULT [calibrate]: a fault script run by itself: the scene,
# then TRIALS trials of trial_FAULT; exits 1 if one failed.
fault_main() {
  step "$1: scene: 3 $ENGINE nodes, registry, image ${FAULT_IMAGE_MB} MB, model $FAULT_MODEL_SHARDS x $FAULT_MODEL_KB KB, seed $FAULT_SEED"
  scene_start
  if [[ ${2-} == calibrate ]]; then calibrate; else scene_reset; fi
  local name=$1  # named for the engine when not podman's: disk-docker
  [[ $ENGINE == podman* ]] || name+=-$ENGINE
  run_trials "$name" "trial_$1"
}
