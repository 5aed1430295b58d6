#!/usr/bin/env bash
# Fault: the disk of a target fills up in the middle of a step. The scene's
# nodes keep their HF cache and their engine's image storage on a tmpfs of
# FAULT_DISK_SIZE each (fleet-sim start --disk); when the step begins, that
# tmpfs is filled (fleet-sim disk-fill) to leave FAULT_DISK_LEAVE bytes, less
# than the copy needs. Trials rotate through the two writes:
#   stage: the target's HF cache fills as its model staging begins (the
#          files are then written until one meets the full disk);
#   load:  the target's image storage fills as its image copy begins
#          (`podman load` then meets the full disk);
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
# image (the config digest dgx1 holds), not a half-loaded one under its name.
check_images() {
  local want rows
  want=$(on_node dgx1 "podman image inspect --format '{{.Id}}' $R/fleet/serve@$D") ||
    fail "dgx1: cannot read the source image's ID"
  rows=$(on_node "$1" "podman images --no-trunc --format '{{.Id}} {{.Repository}}:{{.Tag}}'") ||
    fail "$1: cannot list images"
  while read -r id name; do
    [[ -z $id || $name != *fleet/serve* ]] && continue
    [[ ${id#sha256:} == "${want#sha256:}" ]] || fail "$1: $name names image $id, not the source's $want"
    on_node "$1" "podman image inspect $id >/dev/null" || fail "$1: $name ($id) does not inspect"
  done <<<"$rows"
}

# The events: a target's step has begun (its "Creating..." line: before the
# first byte lands, so the fill leaves less than the whole step needs; a
# .incomplete file seen first may be the last small one, which fits).
event_stage_begun() { step_running 'model\.m@dgx[23]'; }
event_load_begun() { step_running 'image\.bb@dgx[23]'; }

trial_disk() {
  local moment=${DISK_MOMENTS[$((($1 - 1 + ${DISK_FIRST:-0}) % ${#DISK_MOMENTS[@]}))]} node kind ev rc=0
  local cause='no space left|ENOSPC'
  case $moment in
    stage) kind=hf ev=stage_begun ;;
    load) kind=images ev=load_begun ;;
    before) cause='needs .* free at' ;;  # the plan's figures (model_diff NoSpaceError)
  esac
  scene_reset
  if [[ $moment == before ]]; then
    node=${TARGETS[$((RANDOM % ${#TARGETS[@]}))]}
    "$SIM" disk-fill "$SIMDIR" "$node" hf "$FAULT_DISK_LEAVE" || fail "disk-fill $node hf"
    "$SIM" disk-fill "$SIMDIR" "$node" images "$FAULT_DISK_LEAVE" || fail "disk-fill $node images"
    note "full-before=$node"
    start_up_apply
  else
    start_up_apply
  fi
  if [[ $moment == before ]]; then
    :
  elif node=$(wait_event "$ev" "$APPLY_PID"); then
    "$SIM" disk-fill "$SIMDIR" "$node" "$kind" "$FAULT_DISK_LEAVE" || fail "disk-fill $node $kind"
    note "full=$kind@$node"
  else
    note "missed=$moment"
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
