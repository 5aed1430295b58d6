#!/usr/bin/env bash
# Fault: the disk of a target fills up in the middle of a step. The scene's
# nodes keep their HF cache and their engine's image storage on a tmpfs of
# FAULT_DISK_SIZE each (fleet-sim start --disk); when the step begins, that
# tmpfs is filled (fleet-sim disk-fill) to leave FAULT_DISK_LEAVE bytes, less
# than the copy needs. Trials rotate through the two writes:
#   stage: the target's HF cache fills as its model staging begins (the
#          files are then written until one meets the full disk);
#   load:  the target's image storage fills as its image copy begins
#          (`podman load` or `docker load` then meets the full disk);
#   layers (when a target runs docker: FAULT_ENGINE docker or mixed): a
#          docker target's data root is filled before the apply to leave
#          room for the archive `docker load` unpacks there first but not
#          for the layers it then applies (1.5 times the image's size): the
#          load fails applying a layer, not unpacking. (Filled as the copy
#          begins, the fill races the unpacking: what is unpacked by then
#          is not counted, and the load may fit.) The plan does not read
#          an engine's free space, so the apply starts;
#   before: both of a target's disks are full before the apply: the plan
#          must refuse the staging (it reads the free space) naming the
#          node and the figures, and apply nothing.
# The apply must end with exit 1 and an error naming the node and the cause
# (ENOSPC, "No space left on device"); nothing half-written may be left
# under its final name (every blob hashes to its name, no image of the scene
# under its name but the whole one); the node's staging lock is released;
# then the lib.sh invariants of the state. The space is freed (disk-free),
# and a re-apply must converge as after every fault.
# DISK_FIRST=N starts the rotation at DISK_MOMENTS[N] (faults_test: by the seed).
#   TRIALS=N bash tests/faults/disk.sh
DISK_MOMENTS=(stage load before)
[[ ${FAULT_ENGINE:-${FLEET_TEST_ENGINE:-podman}} == podman* ]] || DISK_MOMENTS=(stage load layers before)
FAULT_DISK_LEAVE=${FAULT_DISK_LEAVE:-256k}

# check_blobs NODE: every finished blob of the model on NODE hashes to its
# name (sha256 for LFS files, git's blob sha1 for the others).
check_blobs() {
  local dir
  dir="$(node_root "$1")/hf/hub/$MODEL_DIR/blobs"
  [[ -d $dir ]] || return 0
  python3 - "$dir" <<'PY' || fail "$1: a blob under its final name does not hash to it"
import hashlib, os, sys
d = sys.argv[1]
for name in os.listdir(d):
    if name.endswith(".incomplete"):
        continue
    data = open(os.path.join(d, name), "rb").read()
    if len(name) == 64:
        got = hashlib.sha256(data).hexdigest()
    else:
        got = hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()
    if got != name:
        print("%s: %d bytes hash to %s" % (name, len(data), got))
        sys.exit(1)
PY
}

# check_images NODE: an image of the scene's repository on NODE is the whole
# image (the config digest dgx1 holds), not a half-loaded one under its name;
# each engine with its own CLI (the node's, sim.json). On a docker node, no
# image at all but the whole one (docker 20.10 leaves none when its load
# meets a full data root: a dangling one would be half-loaded layers), and
# nothing left in the daemon's temporary directory (a load unpacks the
# archive there first), which would keep the disk full.
check_images() {
  local want rows e
  e=$(node_field "$1" engine)
  want=$(ce dgx1 image inspect --format "'{{.Id}}'" "$R/fleet/serve@$D") ||
    fail "dgx1: cannot read the source image's ID"
  rows=$(ce "$1" images -a --no-trunc --format "'{{.ID}} {{.Repository}}:{{.Tag}}'") ||
    fail "$1: cannot list images"
  while read -r id name; do
    [[ -z $id || $e == podman && $name != *fleet/serve* ]] && continue
    [[ ${id#sha256:} == "${want#sha256:}" ]] || fail "$1: $name names image $id, not the source's $want"
    ce "$1" image inspect "$id" >/dev/null || fail "$1: $name ($id) does not inspect"
  done <<<"$rows"
  [[ $e != docker ]] || [[ -z $(ls -A "$SIMDIR/nodes/$1/docker/tmp" 2>/dev/null) ]] ||
    fail "$1: the daemon's tmp holds $(ls -A "$SIMDIR/nodes/$1/docker/tmp" | head -3 | tr '\n' ' ')"
}

# The events: a target's step has begun (its "Creating..." line: before the
# first byte lands, so the fill leaves less than the whole step needs; a
# .incomplete file seen first may be the last small one, which fits).
event_stage_begun() { step_running 'model\.m@dgx[23]'; }
event_load_begun() { step_running 'image\.bb@dgx[23]'; }

# fill_before MOMENT: before the apply, fills a random target's disks for the
# before moment (both, to FAULT_DISK_LEAVE), or a random docker target's data
# root for the layers moment (room for the archive and half its layers);
# sets node (not in a subshell: FAULT_SEED replays the choice).
fill_before() {
  local n targets=("${TARGETS[@]}") leave=$FAULT_DISK_LEAVE size
  if [[ $1 == layers ]]; then
    targets=()
    for n in "${TARGETS[@]}"; do [[ $(node_field "$n" engine) != docker ]] || targets+=("$n"); done
    ((${#targets[@]})) || fail "the layers moment needs a docker target"
    size=$(ce dgx1 image inspect --format "'{{.Size}}'" "$R/fleet/serve@$D") || fail "dgx1: image size"
    leave=$((size * 3 / 2))
  fi
  node=${targets[$((RANDOM % ${#targets[@]}))]}
  [[ $1 == layers ]] || "$SIM" disk-fill "$SIMDIR" "$node" hf "$leave" || fail "disk-fill $node hf"
  "$SIM" disk-fill "$SIMDIR" "$node" images "$leave" || fail "disk-fill $node images"
  note "full-$1=$node"
}

trial_disk() {
  local moment=${DISK_MOMENTS[$((($1 - 1 + ${DISK_FIRST:-0}) % ${#DISK_MOMENTS[@]}))]} node kind ev rc=0
  local cause='no space left|ENOSPC' prefill=0
  case $moment in
    stage) kind=hf ev=stage_begun ;;
    load) kind=images ev=load_begun ;;
    layers) prefill=1 ;;
    before) cause='needs .* free at' prefill=1 ;;  # the plan's figures (model_diff NoSpaceError)
  esac
  scene_reset
  ((prefill == 0)) || fill_before "$moment"
  start_up_apply
  if ((prefill)); then
    :
  elif node=$(wait_event "$ev" "$APPLY_PID"); then
    apply_alive || unlanded "the apply had ended"
    "$SIM" disk-fill "$SIMDIR" "$node" "$kind" "$FAULT_DISK_LEAVE" || fail "disk-fill $node $kind"
    note "full=$kind@$node"
  else
    unlanded "missed=$moment"
  fi
  wait_apply "$APPLY_PID" "$FAULT_APPLY_LIMIT" || rc=$?
  check_apply_outcome "$rc" "${node-}"
  if [[ -n ${node-} ]]; then
    [[ $rc == 1 ]] || { "$SIM" disk-free "$SIMDIR" "$node"; fail "the apply succeeded on a full disk"; }
    grep -E '^Error' "$WORK/apply.log" | grep "$node" | grep -qiE "$cause" ||
      fail "no error names $node and the cause ($cause): $(grep -m1 '^Error' "$WORK/apply.log" | cut -c1-300)"
    note "cause-named"
  fi
  check_state_after_fault "$WORK/apply.log"
  local n
  for n in "${TARGETS[@]}"; do
    check_blobs "$n"
    check_images "$n"
    ! ls -d "$(node_root "$n")/hf/hub"/.fleet-staging-* >/dev/null 2>&1 ||
      fail "$n: the staging lock is left after the failed apply"
  done
  [[ -z ${node-} ]] || "$SIM" disk-free "$SIMDIR" "$node" || fail "disk-free $node"
  recover_and_check
}

if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
  FAULT_DISK_SIZE=${FAULT_DISK_SIZE:-256m}
  source "$(dirname "$0")/lib.sh"
  fault_main disk
fi
