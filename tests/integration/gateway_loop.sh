# shellcheck shell=bash
# A client loop through the gateway at $GW:8000 while a change is applied:
# gateway_client.py sends 5 chat requests a second until told to stop, and
# the loop's summary says how many were answered and how many failed.
#
# Source after lib.sh (uses $WORK, $ROOT, BG_PIDS, fail); the test sets GW.
LOOP=""

# start_loop MODEL: the loop, its requests for MODEL.
start_loop() {
  rm -f "$WORK/loop.stop" "$WORK/loop.out"
  python3 "$ROOT/tests/integration/gateway_client.py" "$GW" 8000 "$1" 5 "$WORK/loop.stop" "$WORK/loop.out" &
  LOOP=$!
  BG_PIDS+=("$LOOP")
  sleep 1
}

# stop_loop MIN: stops the loop; fails unless no request failed and at
# least MIN were answered.
stop_loop() {
  touch "$WORK/loop.stop"
  wait "$LOOP" || fail "the client loop failed"
  local summary answered
  summary=$(head -1 "$WORK/loop.out")
  echo "   client loop: $summary"
  [[ $summary == *" failed=0" ]] || fail "requests failed through the gateway: $(cat "$WORK/loop.out")"
  answered=${summary%% *}
  ((${answered#ok=} >= $1)) || fail "only ${answered#ok=} requests answered (expected >= $1)"
}
