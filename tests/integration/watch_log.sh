# shellcheck shell=bash
# What a test reads from `fleet watch --log $LOG` (JSON lines) and from the
# state while the watch ($WATCH) runs. Sourced after lib.sh, by the heal tests.
#
# The waits parse the log or the state again only when the file changed:
# each parse is a python3 start (~60 ms of CPU on a loaded 2-core machine),
# and a parse every 0.1 s was most of a waiting test's CPU (heal_slow_test's
# quarantine wait of up to 240 s: 2,400 of them). The watch writes a round
# line every round, so the log is parsed about once a round.

# events_of KIND ADDRESS [OUTCOME]: how many such events $LOG holds.
events_of() {
  python3 - "$LOG" "$@" <<'PY'
import json, sys
log, kind, addr = sys.argv[1:4]
outcome = sys.argv[4] if len(sys.argv) > 4 else None
print(sum(1 for e in map(json.loads, open(log))
          if e.get("event") == kind and e.get("address") == addr and outcome in (None, e.get("outcome"))))
PY
}

# rounds: how many rounds $LOG holds.
rounds() {
  local n
  n=$(grep -c '"round"' "$LOG" 2>/dev/null)
  echo "${n:-0}"
}

# file_stamp FILE: its size and modification time, or nothing where it is absent.
file_stamp() { stat -c '%s %y' "$1" 2>/dev/null || true; }

# wait_event KIND ADDRESS OUTCOME SECONDS [BEFORE]: until $LOG holds more
# than BEFORE (default 0) such events; fails at SECONDS, or when the watch died.
# The watch appends to $LOG: what was added is read from a descriptor kept
# open on it (bash's read starts no process, as a `stat` every 0.1 s did),
# and the log is parsed when something was.
wait_event() {
  local before=${5:-0} fd='' added=1 line
  for _ in $(seq $(($4 * 10))); do
    [[ -n $fd || ! -e $LOG ]] || exec {fd}<"$LOG"
    if [[ -n $fd ]]; then
      while read -r -u "$fd" line || [[ -n $line ]]; do added=1; done
      if ((added)); then
        added=0
        if (($(events_of "$1" "$2" "$3") > before)); then
          exec {fd}<&-
          return 0
        fi
      fi
    fi
    kill -0 "$WATCH" 2>/dev/null ||
      fail "fleet watch died: $(tail -20 "$WORK/watch.out" "$WORK/watch.err" 2>/dev/null)"
    nap 0.1
  done
  fail "no $1 $3 event for $2 within $4 s: $(grep -v '"round"' "$LOG" | tail -5; tail -20 "$WORK/watch.out")"
}

# wait_heal_started ADDRESS: until the state records ADDRESS's heal as
# started (heal.in_progress_since); fails after 30 s.
wait_heal_started() {
  local seen='' stamp
  for _ in $(seq 300); do
    stamp=$(file_stamp "$(state_file)")
    if [[ $stamp != "$seen" ]]; then
      seen=$stamp
      python3 -c '
import json, sys
r = [x for x in json.load(open(sys.argv[1]))["resources"] if x["address"] == sys.argv[2]][0]
sys.exit(0 if r["attributes"].get("heal", {}).get("in_progress_since") else 1)' \
        "$(state_file)" "$1" 2>/dev/null && return 0
    fi
    nap 0.1
  done
  fail "the state never recorded $1's heal as started within 30 s"
}
