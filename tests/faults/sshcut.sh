#!/usr/bin/env bash
# Fault: the SSH connection cut in the middle of a step, by killing (-9) the
# node's sshd session processes (every connection fleet has to that node:
# the step's, a staging lock keeper's) while the step runs. Trials rotate
# through the steps: an image copy (a target's `podman load`), model staging
# (a target's .incomplete file), the module reload (dgx2's modprobe), the
# container start (dgx2's `podman run`).
# The apply must end (no hang) with success (the step retried) or exit 1
# with an error naming the node; then the invariants of lib.sh.
#   TRIALS=N bash tests/faults/sshcut.sh
SSHCUT_STEPS=(image stage reload start)

# cut_sessions NODE: kills (-9) the per-connection sshd processes of the
# node (lib.sh's session_pids), not the listener: the node stays up. With
# none to kill, or the apply ended, the cut did not land.
cut_sessions() {
  local pids
  apply_alive || { unlanded "the apply had ended"; return; }
  pids=$(session_pids "$1")
  [[ -n $pids ]] || { unlanded "no session on $1"; return; }
  kill -9 $pids 2>/dev/null || true
  note "sessions=$(wc -w <<<"$pids")"
}

trial_sshcut() {
  local ev=${SSHCUT_STEPS[$((($1 - 1) % ${#SSHCUT_STEPS[@]}))]} node ms rc=0
  scene_reset
  start_up_apply
  if node=$(wait_event "$ev" "$APPLY_PID"); then
    random_pause 200
    ms=$REPLY
    note "cut=$ev@$node+${ms}ms"
    cut_sessions "$node"
  else
    unlanded "missed=$ev"
  fi
  wait_apply "$APPLY_PID" "$FAULT_APPLY_LIMIT" || rc=$?
  check_apply_outcome "$rc" "${node-}"
  check_state_after_fault "$WORK/apply.log"
  recover_and_check
}

if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
  source "$(dirname "$0")/lib.sh"
  fault_main sshcut
fi
