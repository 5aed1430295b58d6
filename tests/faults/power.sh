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
    # The log's size as the crash begins and once it has returned (every
    # process of the node dead by then): the kill itself takes some ms.
    wc -c <"$WORK/apply.log" >"$WORK/apply.bytes-at-crash"
    "$SIM" crash "$SIMDIR" "$node" >/dev/null 2>&1 || fail "fleet-sim crash $node"
    wc -c <"$WORK/apply.log" >"$WORK/apply.bytes-after-crash"
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
# node's steps had all ended. A step whose "complete" line came while
# `fleet-sim crash` ran may have ended before the kill (a serve's step takes
# 0.2 s); one whose line came after it returned ended with every process of
# its node dead: it read an error as success (as the serve step's id read
# did), or its state save took longer than the crash command. The trial's
# line says which, and the log is kept in FAULT_LOG_DIR.
note_success_after_crash() {
  local during after
  during=$(steps_completed_between "$1" "$(cat "$WORK/apply.bytes-at-crash")" \
    "$(cat "$WORK/apply.bytes-after-crash")")
  after=$(steps_completed_between "$1" "$(cat "$WORK/apply.bytes-after-crash")" "")
  [[ -n $during$after ]] || return 0
  [[ -z $during ]] || note "ended-while-the-crash-ran: ${during% }"
  [[ -z $after ]] || note "ENDED-AFTER-THE-CRASH: ${after% }"
  if [[ -n ${FAULT_LOG_DIR-} ]]; then
    mkdir -p "$FAULT_LOG_DIR"
    cp "$WORK/apply.log" "$FAULT_LOG_DIR/power-rc0-$(date +%s)-$BASHPID.apply.log"
  fi
}
# steps_completed_between NODE FROM [TO]: the node's steps whose "complete"
# line lies in bytes FROM..TO of the apply's log (TO empty: to its end).
steps_completed_between() {
  local to=${3:-$(wc -c <"$WORK/apply.log")}
  head -c "$to" "$WORK/apply.log" | tail -c +"$(($2 + 1))" |
    grep -oE "^[^ ]+[.@]$1: complete" | cut -d: -f1 | tr '\n' ' '
}

if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
  source "$(dirname "$0")/lib.sh"
  fault_main power
fi
