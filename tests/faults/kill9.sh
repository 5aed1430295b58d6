#!/usr/bin/env bash
# Fault: `kill -9` of fleet at a random moment of a long apply (an image copy
# to two nodes, a model staged on two nodes, a display RAM module reload and
# a serve start; tests/faults/lib.sh). Trials rotate through the moments:
# uniform over the apply's calibrated length, during a copy (an image load
# or a model file being written on a target), during a model's staging
# (its staging lock held: the re-apply must take the dead controller's lock
# over at once, not wait for its keeper to notice), during the module
# reload, during the container start. After each kill the invariants of lib.sh are
# checked: the state lost nothing and holds every step fleet said was
# complete, an unlocked display is recorded, and a re-apply leaves no
# duplicate or leftover and converges.
#   TRIALS=N bash tests/faults/kill9.sh
KILL9_MOMENTS=(random copy stage reload start)

trial_kill9() {
  local moment=${KILL9_MOMENTS[$((($1 - 1) % ${#KILL9_MOMENTS[@]}))]} node ms
  scene_reset
  start_up_apply
  if [[ $moment == random ]]; then
    # Within the first 80 % of the calibrated apply: later, a slightly faster
    # apply has often ended (the harness then runs another trial).
    random_pause $((UP_MS * 8 / 10))
    ms=$REPLY
    note "at=${ms}ms"
  elif node=$(wait_event "$moment" "$APPLY_PID"); then
    random_pause 300
    ms=$REPLY
    note "during=$moment@$node+${ms}ms"
  else
    unlanded "missed=$moment"
  fi
  apply_alive || unlanded "the apply had ended"
  kill -9 "$APPLY_PID" 2>/dev/null
  wait "$APPLY_PID" 2>/dev/null
  check_state_after_fault "$WORK/apply.log"
  recover_and_check
}

if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
  source "$(dirname "$0")/lib.sh"
  fault_main kill9 calibrate
fi
