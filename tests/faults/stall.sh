#!/usr/bin/env bash
# Fault: a node that stalls mid-session: its sshd session processes (every
# connection fleet has to it) get SIGSTOP in the middle of a step, so the
# TCP connection stays up (the kernel still ACKs) but nothing answers. Trials
# rotate through the steps as sshcut.sh does. fleet must end the apply by
# itself within STALL_LIMIT seconds (the transport's bounded silence,
# src/ssh_transport.h) with an error naming the node; the sessions are then
# resumed (they find their connection gone) and the invariants of lib.sh
# are checked.
#   TRIALS=N bash tests/faults/stall.sh
STALL_STEPS=(${STALL_STEPS:-image stage reload start})
STALL_LIMIT=${STALL_LIMIT:-120}
# fleet gives up on a session silent for 45 s, and on a connection or an
# exec request unanswered for 10 s (the stop can catch the keeper's
# connection being set up: it failed after 11 s, "no answer to the exec
# request"); an apply that fails sooner was not stopped, but refused or reset.
STALL_MIN_S=${STALL_MIN_S:-9}

trial_stall() {
  local ev=${STALL_STEPS[$((($1 - 1) % ${#STALL_STEPS[@]}))]} node ms rc=0 stopped= t0
  scene_reset
  start_up_apply
  if node=$(wait_event "$ev" "$APPLY_PID"); then
    random_pause 200
    ms=$REPLY
    note "stop=$ev@$node+${ms}ms"
    if ! apply_alive; then
      unlanded "the apply had ended"
    else
      stopped=$(session_pids "$node")
      [[ -n $stopped ]] || unlanded "no session on $node"
      [[ -z $stopped ]] || kill -STOP $stopped 2>/dev/null || true
    fi
  else
    unlanded "missed=$ev"
  fi
  t0=$SECONDS
  FAULT_APPLY_LIMIT=$STALL_LIMIT wait_apply "$APPLY_PID" "$STALL_LIMIT" || rc=$?
  note "ended-after=$((SECONDS - t0))s"
  [[ -z $stopped ]] || kill -CONT $stopped 2>/dev/null || true
  # Failed sooner than fleet's limits on silence: the stop missed the
  # sessions fleet used (a refused or reset connection fails at once).
  if [[ $rc == 1 && -n $stopped ]] && ((SECONDS - t0 < STALL_MIN_S)); then
    fail "the apply failed $((SECONDS - t0)) s after the stop, before fleet's silence limit"
  fi
  FAULT_APPLY_LIMIT=$STALL_LIMIT check_apply_outcome "$rc" "${node-}"
  check_state_after_fault "$WORK/apply.log"
  recover_and_check
}

if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
  source "$(dirname "$0")/lib.sh"
  fault_main stall
fi
