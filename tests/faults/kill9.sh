#!/usr/bin/env bash
# Fault: `kill -9` of fleet at a random moment of a long apply (an image copy
# to two nodes, a model staged on two nodes, a display RAM module reload and
# a serve start; tests/faults/lib.sh). Trials rotate through the moments:
# uniform over the apply's calibrated length, during a copy (an image load
# or a model file being written on a target), during a model's staging
# (its staging lock held: the re-apply must take the dead controller's lock
# over at once, not wait for its keeper to notice), during the module
# reload, during the container start, and during a heal (`fleet watch --heal`
# killed while it brings back a serve whose container was killed: the next
# watch must finish the heal). After each kill the invariants of lib.sh are
# checked: the state lost nothing and holds every step fleet said was
# complete, an unlocked display is recorded, and a re-apply leaves no
# duplicate or leftover and converges.
#   TRIALS=N bash tests/faults/kill9.sh
#   KILL9_MOMENTS="heal" TRIALS=3 bash tests/faults/kill9.sh   # one moment only
read -r -a KILL9_MOMENTS <<<"${KILL9_MOMENTS:-random copy stage reload start heal}"

trial_kill9() {
  local moment=${KILL9_MOMENTS[$((($1 - 1) % ${#KILL9_MOMENTS[@]}))]} node ms
  [[ $moment != heal ]] || { kill9_heal; return; }
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

# heal_marked: the serve's state record says a heal is under way (the watch
# writes it before it touches the container, clears it when done).
heal_marked() { grep -qE '"in_progress_since": *[1-9]' "$(state_file)"; }

# kill_serve: the serve's container on dgx2 dies, all of it, as it does on
# a real node: `kill` signals the container's init only, and the rest dies
# with it there (the kernel ends a PID namespace with its init; without one,
# runc's delete kills what is left in the container's cgroup). fleet-sim's
# rootless podman has neither (host PID namespace, no cgroups): the recipe's
# httpd, a child of its sh, lived on under conmon, holding the port, while
# podman said "exited", and no heal could start the serve again (the heal
# trial failed so whether or not the watch was killed). There the container's
# process group (its init's: the httpd is in it) gets the SIGKILL; podman
# records the exit (137) as for a kill. `docker kill` leaves nothing behind
# on fleet-sim (its dockerd is rootful): it stays.
kill_serve() {
  [[ $(node_field dgx2 engine) == podman ]] || { ce dgx2 kill fleet-serve >/dev/null; return; }
  # shellcheck disable=SC2016 # expanded on the node
  on_node dgx2 'pid=$(podman container inspect --format "{{.State.Pid}}" fleet-serve) &&
    [ "$pid" -gt 1 ] && kill -KILL "-$pid"'
}

# kill9_heal: the scene up, the serve's container killed, `fleet watch
# --heal` started; killed -9 once its heal is under way (the record marked),
# after a random pause, or (every other trial) during its container start. Then the state must load and hold what it held, a
# watch of 4 rounds must bring the serve back and clear the mark, and the
# re-apply must find nothing to do.
kill9_heal() {
  scene_reset
  fl apply --auto-approve || fail "the up apply failed"
  cp "$(state_file)" "$WORK/state.before"
  rm -f "$WORK/apply.log"
  kill_serve || fail "cannot kill the serve's container"
  "$FLEET" -C "$REPO" --no-color watch --heal --every 1s >"$WORK/apply.log" 2>&1 </dev/null &
  APPLY_PID=$!
  local t
  for ((t = 0; t < 1500; t++)); do heal_marked && break; nap 0.02; done
  heal_marked || unlanded "no heal began"
  # Every other trial waits for the heal's container start itself (it comes
  # after the heal's inspects and port check, past most random pauses).
  if ((RANDOM % 2)); then
    for ((t = 0; t < 500; t++)); do node_runs dgx2 '(podman|docker) (start|run)' && break; nap 0.01; done
    node_runs dgx2 '(podman|docker) (start|run)' && note "during=heal-start@dgx2" || note "missed-start"
  else
    random_pause 200
    note "during=heal@dgx2+${REPLY}ms"
  fi
  heal_marked || unlanded "the heal had ended"
  kill -9 "$APPLY_PID" 2>/dev/null
  wait "$APPLY_PID" 2>/dev/null
  check_state_after_fault "$WORK/apply.log"
  timeout 120 "$FLEET" -C "$REPO" --no-color watch --heal --every 1s --rounds 4 >"$WORK/watch2.log" 2>&1 </dev/null ||
    fail "the next watch failed: $(tail -3 "$WORK/watch2.log")"
  ! heal_marked || fail "the next watch left the heal marked under way"
  local st
  st=$(ce dgx2 container inspect --format '{{.State.Status}}' fleet-serve 2>&1)
  [[ $st == running ]] ||
    fail "the serve is not running after the next watch ($st): $(grep '^!!!' "$WORK/watch2.log" | tail -3); port $PORT held by: $(ss -ltnpH "sport = :$PORT" | tr -s ' ' | cut -c1-300)"
  curl -sf -m 5 "http://127.0.0.1:$PORT/v1/models" >/dev/null || fail "the serve does not answer after the next watch"
  apply_retrying || fail "the re-apply failed: $RETRY_WHY"
  grep -q "No changes" "$WORK/out" || fail "the re-apply after the heal changed something: $(grep -m3 -E '^ *[-+~]' "$WORK/out")"
  check_clean
  assert_converged
}

if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
  source "$(dirname "$0")/lib.sh"
  fault_main kill9 calibrate
fi
