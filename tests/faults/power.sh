#!/usr/bin/env bash
# Fault: a node loses power in the middle of a step (`fleet-sim crash`: every
# process of the node, its sessions and containers, SIGKILLed at once; files
# kept; nvidia_drm back to its boot defaults), then comes back (node-start:
# a new boot id). Trials rotate through the steps as sshcut.sh does.
# The apply must end with an error naming the node (or success, if the step
# was already done); then the next plan must see what is really there: the
# re-apply converges and leaves no duplicate or leftover (lib.sh).
#   TRIALS=N bash tests/faults/power.sh
POWER_STEPS=(image stage reload start)

trial_power() {
  local ev=${POWER_STEPS[$((($1 - 1) % ${#POWER_STEPS[@]}))]} node ms rc=0
  scene_reset
  start_up_apply
  if node=$(wait_event "$ev" "$APPLY_PID"); then
    random_pause 200
    ms=$REPLY
    apply_alive || unlanded "the apply had ended"
    wc -c <"$WORK/apply.log" >"$WORK/apply.bytes-at-crash"  # before: the crash takes a while
    "$SIM" crash "$SIMDIR" "$node" >/dev/null 2>&1 || fail "fleet-sim crash $node"
    note "crash=$ev@$node+${ms}ms"
  else
    unlanded "missed=$ev"
  fi
  wait_apply "$APPLY_PID" "$FAULT_APPLY_LIMIT" || rc=$?
  check_apply_outcome "$rc" "${node-}"
  [[ $rc != 0 || -z ${node-} ]] || note_success_after_crash "$node"
  power_back_and_recover "${node-}"
}

# An apply that succeeds although its node lost power is right only if the
# node's steps had all ended. A step whose "complete" line came after the
# crash began either ended in the few ms between its last command and that
# line (the state is saved in between) or read an error as success (as the
# serve step's id read did). The trial's line says which steps, and its log
# is kept in FAULT_LOG_DIR to tell the two apart.
note_success_after_crash() {
  local late at
  at=$(cat "$WORK/apply.bytes-at-crash")
  late=$(tail -c +"$((at + 1))" "$WORK/apply.log" | grep -oE "^[^ ]+[.@]$1: complete" |
    cut -d: -f1 | tr '\n' ' ')
  [[ -n $late ]] || return 0
  note "ended-after-the-crash: ${late% }"
  if [[ -n ${FAULT_LOG_DIR-} ]]; then
    mkdir -p "$FAULT_LOG_DIR"
    cp "$WORK/apply.log" "$FAULT_LOG_DIR/power-rc0-$(date +%s)-$BASHPID.apply.log"
  fi
}

if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
  source "$(dirname "$0")/lib.sh"
  fault_main power
fi
