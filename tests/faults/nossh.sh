#!/usr/bin/env bash
# Fault: a node that accepts TCP but never speaks SSH (odd trials: silent;
# even trials: half a banner, then silence). dgx3's address in the manifests
# points at such a listener; `fleet plan` and `fleet apply` must exit 1
# after the connect timeout (NOSSH_CONNECT_TIMEOUT_S: dgx3's
# ssh.connect_timeout; default 10, fleet's own default, the key left out)
# and within NOSSH_MARGIN_S of it, with an error naming dgx3 at the
# listener's port and the timeout, and apply must change nothing.
#   TRIALS=N bash tests/faults/nossh.sh
NOSSH_MARGIN_S=${NOSSH_MARGIN_S:-15}
NOSSH_CONNECT_TIMEOUT_S=${NOSSH_CONNECT_TIMEOUT_S:-10}

# silent_listener MODE: a loopback listener that accepts and says nothing
# (MODE half: "SSH-2.0-" and no end of line). Sets LISTENER_PID and
# LISTENER_PORT.
silent_listener() {
  # The last trial's file goes first: seen by the wait below before the new
  # listener truncates it, its port (or, read a moment later, nothing) was
  # taken for this one's, and every trial after the first pointed dgx3 at a
  # closed port: "connection refused" at once, not the silent node.
  rm -f "$WORK/listener.port"
  python3 -c '
import socket, sys, time
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(16)
print(s.getsockname()[1], flush=True)
held = []
while True:
    c, _ = s.accept()
    if sys.argv[1] == "half":
        c.sendall(b"SSH-2.0-")
    held.append(c)
' "$1" >"$WORK/listener.port" &
  LISTENER_PID=$!
  local i
  for ((i = 0; i < 50; i++)); do [[ -s $WORK/listener.port ]] && break; sleep 0.1; done
  LISTENER_PORT=$(cat "$WORK/listener.port")
  [[ $LISTENER_PORT =~ ^[0-9]+$ ]] || fail "the silent listener did not start (port '$LISTENER_PORT')"
}

trial_nossh() {
  local mode=silent port cmd t0 secs serial
  (($1 % 2 == 0)) && mode=half
  repo_up
  silent_listener "$mode"
  trap 'kill "$LISTENER_PID" 2>/dev/null || true' EXIT  # this trial's subshell only
  port=$LISTENER_PORT
  note "mode=$mode"
  # dgx3's ssh port -> the listener (and its connect timeout, unless fleet's
  # default 10 s)
  local timeout_key=
  ((NOSSH_CONNECT_TIMEOUT_S == 10)) || timeout_key=", connect_timeout: ${NOSSH_CONNECT_TIMEOUT_S}s"
  sed -i "s/port: $(node_field dgx3 port)}/port: $port$timeout_key}/" "$REPO/fleet.yaml"
  grep -q "port: $port$timeout_key}" "$REPO/fleet.yaml" || fail "could not point dgx3 at the listener"
  serial=$(state_serial 2>/dev/null || echo none)
  for cmd in plan apply; do
    t0=$SECONDS
    if [[ $cmd == apply ]]; then expect_rc 1 apply --auto-approve; else expect_rc 1 plan; fi
    secs=$((SECONDS - t0))
    ((secs <= NOSSH_CONNECT_TIMEOUT_S + NOSSH_MARGIN_S)) || fail "$cmd took $secs s to give up on dgx3"
    # A node that never speaks cannot be told from a slow one sooner.
    ((secs >= NOSSH_CONNECT_TIMEOUT_S - 1)) ||
      fail "$cmd gave up on dgx3 after $secs s, before the ${NOSSH_CONNECT_TIMEOUT_S} s timeout"
    # The listener's port, and a timeout: a refused connection fails at once
    # and proves nothing about a node that never speaks.
    grep -hE "dgx3.*:$port\b" "$WORK/out" "$WORK/err" | grep -viE 'refused' | grep -qiE 'timeout|timed out' ||
      fail "$cmd's error does not name dgx3 at port $port and a timeout: $(grep -h -m1 dgx3 "$WORK/out" "$WORK/err")"
    note "$cmd=${secs}s"
  done
  [[ $(state_serial 2>/dev/null || echo none) == "$serial" ]] || fail "apply changed the state"
  kill "$LISTENER_PID" 2>/dev/null || true
  wait "$LISTENER_PID" 2>/dev/null || true
  repo_up
}

if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
  source "$(dirname "$0")/lib.sh"
  fault_main nossh
fi
