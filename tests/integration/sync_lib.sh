# shellcheck shell=bash
# Helpers of the fleet watch --sync tests: an operator's repo ($OP) pushed
# to a bare origin ($ORIGIN), the lab's checkout ($REPO) a watch follows,
# and the watch's log ($LOG). Source it after lib.sh.
LOG=$WORK/watch.jsonl
ORIGIN=$WORK/origin.git
OP=$WORK/operator
export GIT_AUTHOR_NAME=fleet-test GIT_AUTHOR_EMAIL=test@fleet.invalid
export GIT_COMMITTER_NAME=fleet-test GIT_COMMITTER_EMAIL=test@fleet.invalid

rounds() {
  local n
  n=$(grep -c '"round"' "$LOG" 2>/dev/null)
  echo "${n:-0}"
}
# sync_events OUTCOME COMMIT: how many sync events of that outcome for COMMIT.
sync_events() {
  python3 - "$LOG" "$1" "$2" <<'PY'
import json, sys
n = 0
for line in open(sys.argv[1]):
    e = json.loads(line)
    n += e.get("event") == "sync" and e.get("outcome") == sys.argv[2] and e.get("commit") == sys.argv[3]
print(n)
PY
}
# sync_detail COMMIT: the detail of COMMIT's last sync event.
sync_detail() {
  python3 - "$LOG" "$1" <<'PY'
import json, sys
d = ""
for line in open(sys.argv[1]):
    e = json.loads(line)
    if e.get("event") == "sync" and e.get("commit") == sys.argv[2]:
        d = e.get("detail", "")
print(d)
PY
}
wait_sync() {  # wait_sync OUTCOME COMMIT SECONDS
  for _ in $(seq $(($3 * 10))); do
    (($(sync_events "$1" "$2") > 0)) && return 0
    kill -0 "$WATCH" 2>/dev/null || fail "fleet watch died: $(tail -20 "$WORK/watch.out" "$WORK/watch.err")"
    sleep 0.1
  done
  fail "no sync $1 event for $2 within $3 s: $(grep '"event":"sync"' "$LOG" | tail -3; tail -10 "$WORK/watch.out")"
}
synced() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1])).get("sync",{}).get("commit",""))' "$(state_file)"; }
# start_watch [ARGS...]: fleet watch --sync --every 1s on the lab's checkout,
# in the background (WATCH: its pid), once its first round is logged.
start_watch() {
  "$FLEET" -C "$REPO" --no-color watch --sync --every 1s --log "$LOG" "$@" \
    >"$WORK/watch.out" 2>"$WORK/watch.err" </dev/null &
  WATCH=$!
  BG_PIDS+=("$WATCH")
  for _ in $(seq 100); do (($(rounds) >= 1)) && break; sleep 0.1; done
}
stop_watch() {
  kill -TERM "$WATCH"
  wait "$WATCH" || fail "fleet watch exited $?"
}
# init_origin: a bare origin and the operator's repo pushing to it.
init_origin() {
  git init -q --bare -b main "$ORIGIN"
  git init -q -b main "$OP"
  git -C "$OP" remote add origin "$ORIGIN"
}
# commit_push MESSAGE [GIT-COMMIT-OPTIONS...]: commits all of $OP, pushes it
# and prints the commit.
commit_push() {
  local msg=$1
  shift
  git -C "$OP" add -A
  git -C "$OP" commit -q "$@" -m "$msg"
  git -C "$OP" push -q origin HEAD:main
  git -C "$OP" rev-parse HEAD
}
