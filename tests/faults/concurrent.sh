#!/usr/bin/env bash
# Fault: two fleet commands on one state at once: two applies (odd trials),
# an apply and a destroy (even trials), the second started 0-300 ms after
# the first. The state lock must let exactly one run: the other fails fast
# (CONCURRENT_FAST_S; the first too, when the second took the lock first)
# with exit 1 naming the holder (its pid and operation), runs no step and
# writes nothing of the state: both commands run under strace, and the
# loser's successful file calls on the state folder may only open the lock
# file (and read). Then the winner's result is checked: an apply's leaves
# no duplicate or leftover and converges (lib.sh); after a destroy, the up
# apply converges.
#   TRIALS=N bash tests/faults/concurrent.sh
CONCURRENT_FAST_S=${CONCURRENT_FAST_S:-10}
# Only these calls stop the traced process (seccomp filter): cheap enough
# not to change who wins. -y names the file behind an fd (ftruncate, fchmod).
# Writes through an fd (write, pwrite) are not traced (every socket write
# would stop the process): the lock file, the one file a loser opens for
# writing, is checked by content instead (lock_record_kept).
TRACE=(strace -f -qq -y --seccomp-bpf -e status=successful
  -e trace=open,openat,openat2,creat,rename,renameat,renameat2,unlink,unlinkat,link,linkat,symlink,symlinkat,mkdir,mkdirat,rmdir,truncate,ftruncate,chmod,fchmod,fchmodat,chown,fchown,lchown,fchownat,utimensat)

# state_writes TRACE...: the traced calls that changed something in the state
# folder (its paths, or an fd strace names as it, `<DIR>`): all but opening
# the lock file (every command does, to flock it) and opens with no flag
# that writes.
state_writes() {
  local dir lock
  dir=$(dirname "$(state_file)")
  lock="$(basename "$(state_file)").lock"
  grep -hF "$dir" "$@" |
    grep -vE 'open(at)?\(.*O_RDONLY(\|O_(CLOEXEC|NOFOLLOW|DIRECTORY|NONBLOCK|NOCTTY|LARGEFILE|PATH|NOATIME))*[,)]' |
    grep -vE "open(at)?\(.*/$lock\", O_RDWR\|O_CREAT\|O_CLOEXEC, 0600\)" || true
}

# lock_record_kept: right after the loser failed, while the winner still
# holds the state lock, its lock file names a running process (the winner),
# not the loser that just exited: the loser did not write into it.
lock_record_kept() {
  local lock pid
  lock="$(state_file).lock"
  [[ -s $lock ]] || return 0  # the winner had finished: nothing held to compare
  if ! pid=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["pid"])' "$lock" 2>/dev/null); then
    [[ -e $lock ]] || return 0  # released meanwhile
    fail "the lock file does not parse right after the loser: $(head -c 200 "$lock")"
  fi
  [[ -d /proc/$pid && $pid != "$1" ]] ||
    fail "right after the loser (strace pid $1) failed, the lock file names pid $pid, not a running holder"
  note "lock-record-kept"
}

trial_concurrent() {
  local second=apply ms t0 rc1=0 rc2=0 pid2 loser= loser_log loser_trace writes
  (($1 % 2 == 0)) && second=destroy
  scene_reset
  APPLY_WRAP=("${TRACE[@]}" -o "$WORK/trace.first")
  start_up_apply
  APPLY_WRAP=()
  local t1=$EPOCHREALTIME  # about when the first started (start_up_apply just ran)
  random_pause 300
  ms=$REPLY
  note "second=$second+${ms}ms"
  apply_alive || unlanded "the first apply had ended"
  t0=$EPOCHREALTIME
  "${TRACE[@]}" -o "$WORK/trace.second" \
    "$FLEET" -C "$REPO" --no-color "$second" --auto-approve >"$WORK/second.log" 2>&1 </dev/null &
  pid2=$!
  wait_apply "$pid2" "$FAULT_APPLY_LIMIT" || rc2=$?
  if [[ $rc2 == 1 ]] && apply_alive; then lock_record_kept "$pid2"; fi
  local t2
  t2=$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN{printf "%.1f", b-a}')
  wait_apply "$APPLY_PID" "$FAULT_APPLY_LIMIT" || rc1=$?
  [[ $rc1 != 124 && $rc2 != 124 ]] || fail "a command hung (apply $rc1, $second $rc2)"
  if [[ $rc1 == 0 && $rc2 == 1 ]]; then
    loser=$second loser_log=$WORK/second.log loser_trace=$WORK/trace.second
    awk -v t="$t2" -v m="$CONCURRENT_FAST_S" 'BEGIN{exit !(t <= m)}' ||
      fail "the $second that lost took ${t2} s to fail"
  elif [[ $rc1 == 1 && $rc2 == 0 ]]; then
    loser=first-apply loser_log=$WORK/apply.log loser_trace=$WORK/trace.first
    # Its last write (the error) against its start: the first apply, beaten
    # to the lock, must fail as fast as a second one.
    awk -v a="$t1" -v b="$(date -r "$WORK/apply.log" +%s.%N)" -v m="$CONCURRENT_FAST_S" \
      'BEGIN{exit !(b - a <= m)}' || fail "the first apply, which lost, took over $CONCURRENT_FAST_S s to fail"
  else
    fail "expected one command to succeed and one to fail: apply exited $rc1, $second exited $rc2"
  fi
  note "loser=$loser"
  # The loser changed nothing: it ran no step.
  ! grep -qE ': (Creating|Modifying|Replacing|Destroying)\.\.\.' "$loser_log" ||
    fail "the $loser that lost ran a step: $(grep -m1 -E ': (Creating|Modifying|Replacing|Destroying)' "$loser_log")"
  # ... and wrote nothing of the state (the winner's trace shows the check
  # sees writes: it saved the state).
  [[ -s $loser_trace ]] || fail "no trace of the $loser that lost ($loser_trace)"
  writes=$(state_writes "$loser_trace")
  [[ -z $writes ]] || fail "the $loser that lost wrote in the state folder: $(head -3 <<<"$writes")"
  [[ -n $(state_writes "$WORK/trace.first" "$WORK/trace.second") ]] ||
    fail "neither trace shows a state write: the check would see none"
  grep -qE 'state is locked by .*\(.*\) since .*lock id' "$loser_log" ||
    fail "the $loser that lost does not name the lock holder: $(grep -m1 -i error "$loser_log")"
  if [[ $loser == first-apply ]]; then  # the second (a destroy) ran: bring the fleet up again
    apply_retrying || fail "the up apply after the destroy failed"
  fi
  check_clean
  assert_converged
}

if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
  source "$(dirname "$0")/lib.sh"
  fault_main concurrent
fi
