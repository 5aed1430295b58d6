#!/usr/bin/env bash
# Fault: a node loses power silently in the middle of a step. `fleet-sim
# crash-silent` first drops every packet to and from the node's sshd address
# and port,
# then SIGKILLs all its processes: the controller gets no FIN or RST (the sim's
# plain crash, power.sh, closes the sockets and fleet sees EOF at once), and
# what it sends is never acknowledged, as with a real box whose power went.
# Trials rotate through the steps as sshcut.sh does; in the first round of
# four the node stays dark until the apply has ended, in the next it comes
# back (node-start: a new boot id, its packets flow again) 2-20 s after the
# loss while the apply still waits on it, and so on. fleet must end the apply
# by itself within SILENT_LIMIT seconds (the transport's bounded silence,
# src/ssh_transport.h) with an error naming the node, or succeed if the step
# was done; then the next plan must see what is really there and the
# re-apply converge with no duplicate or leftover (lib.sh).
#   TRIALS=N bash tests/faults/silent.sh
SILENT_STEPS=(${SILENT_STEPS:-image stage reload start})
SILENT_LIMIT=${SILENT_LIMIT:-150}
# fleet gives up on a session silent for 45 s, and on a connection or an
# exec request unanswered for 10 s (stall.sh)
SILENT_MIN_S=${SILENT_MIN_S:-9}

trial_silent() {
  local i=$(($1 - 1)) ev node ms rc=0 t0 back=0 back_ms waker=
  ev=${SILENT_STEPS[$((i % ${#SILENT_STEPS[@]}))]}
  (((i / ${#SILENT_STEPS[@]}) % 2)) && back=1
  scene_reset
  start_up_apply
  if node=$(wait_event "$ev" "$APPLY_PID"); then
    random_pause 200
    ms=$REPLY
    apply_alive || unlanded "the apply had ended"
    "$SIM" crash-silent "$SIMDIR" "$node" >/dev/null 2>&1 || fail "fleet-sim crash-silent $node"
    note "silent-crash=$ev@$node+${ms}ms"
    if ((back)); then
      random_ms 18000
      back_ms=$((2000 + REPLY))
      note "back-after=${back_ms}ms"
      (sleep_ms "$back_ms"; "$SIM" node-start "$SIMDIR" "$node" >/dev/null 2>&1) &
      waker=$!
    fi
  else
    unlanded "missed=$ev"
  fi
  t0=$SECONDS
  FAULT_APPLY_LIMIT=$SILENT_LIMIT wait_apply "$APPLY_PID" "$SILENT_LIMIT" || rc=$?
  note "ended-after=$((SECONDS - t0))s"
  # A node that stays dark cannot fail the apply sooner than fleet's limit
  # on silence: failing at once means the drop missed what fleet dialled.
  if [[ $rc == 1 && -n ${node-} ]] && ((!back && SECONDS - t0 < SILENT_MIN_S)); then
    fail "the apply failed $((SECONDS - t0)) s after the node went dark, before fleet's silence limit"
  fi
  [[ -z $waker ]] || wait "$waker" || fail "fleet-sim node-start $node (while the apply ran)"
  FAULT_APPLY_LIMIT=$SILENT_LIMIT check_apply_outcome "$rc" "${node-}"
  power_back_and_recover "${node-}"
}

if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
  source "$(dirname "$0")/lib.sh"
  fault_main silent
fi
