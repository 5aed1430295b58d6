# shellcheck shell=bash
# Shared set-up for the integration tests: a real simulated fleet (sshd per
# node, see tests/sim/), a manifests repo for it, and assertion helpers.
# Source it; it cleans up after itself on exit.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
FLEET=${FLEET:-$ROOT/build/src/engine/fleet}
SIM=$ROOT/tests/sim/fleet-sim
WORK=$(mktemp -d /var/tmp/fleet-it.XXXXXX)
REPO=$WORK/repo
SIMDIR=$WORK/sim
# python3 is Debian's where a version manager's shim comes first on PATH
# (pyenv's runs pyenv to pick a version: 0.38 s a start here, against 0.04 s
# for /usr/bin/python3). The tests and their helpers start python3 thousands
# of times; a folder first on PATH reaches their children too. The helpers
# use only the standard library.
if [[ -x /usr/bin/python3 && $(command -v python3) != /usr/bin/python3 ]]; then
  mkdir -p "$WORK/bin"
  ln -s /usr/bin/python3 "$WORK/bin/python3"
  PATH=$WORK/bin:$PATH
fi

# The Hugging Face Hub fleet asks at plan time (HF_ENDPOINT): a port nothing
# listens on, so that no test reaches the internet; hub_test.sh points it at
# its stand-in (tests/sim/hub_server.py). No token from the caller's shell.
export HF_ENDPOINT=http://127.0.0.1:9
unset HF_TOKEN HUGGING_FACE_HUB_TOKEN

# nap SECONDS: a sleep that starts no process: `read -t` on a pipe nobody
# writes (this shell holds both its ends). A wait that polls every 0.1 s
# with `sleep` starts 10 processes a second, each 1-3 ms of CPU on a loaded
# 2-core machine: the polls of a test waiting minutes for a watch's rounds.
exec {NAP_FD}<> <(:)
nap() { read -r -t "$1" -u "$NAP_FD" _ || true; }

# Background commands a test started (BG_PIDS+=($!)): killed at its end, so
# that one a failed check left stopped (kill -STOP) or running never holds
# the fleet's sessions, or the test, open.
BG_PIDS=()
kill_bg() {
  local p
  for p in "${BG_PIDS[@]}"; do  # still this shell's child (not a reused pid)
    [[ $(awk '{print $4}' "/proc/$p/stat" 2>/dev/null) == "$$" ]] && kill -9 "$p" 2>/dev/null || true
  done
  true
}
cleanup() {
  kill_bg
  "$SIM" stop "$SIMDIR" --purge >/dev/null 2>&1 || true
  rm -rf "$WORK"
}
trap cleanup EXIT

fail() {
  echo "FAIL: $*" >&2
  [[ -f $WORK/out ]] && { echo "--- stdout:" >&2; cat "$WORK/out" >&2; }
  [[ -f $WORK/err ]] && { echo "--- stderr:" >&2; cat "$WORK/err" >&2; }
  local log  # what the nodes' sshd said last: a dropped session shows there
  for log in "$SIMDIR"/nodes/*/sshd/sshd.log; do
    [[ -s $log ]] && { echo "--- $log (last 5 lines):" >&2; tail -n 5 "$log" >&2; }
  done
  exit 1
}
step() { echo "== $(date +%T) $*"; }

# bg_apply [ARGS...]: fleet apply --auto-approve ARGS in the background; sets
# bg, output in $WORK/bg.out (removed first: the redirection truncates it in
# the child, and until then a wait_output would read the last command's
# output, see its "Modifying" and act before this apply holds the lock).
bg_apply() {
  rm -f "$WORK/bg.out"
  "$FLEET" -C "$REPO" --no-color apply --auto-approve "$@" >"$WORK/bg.out" 2>&1 </dev/null &
  bg=$!
  BG_PIDS+=("$bg")
}

# wait_output FILE PATTERN [SECONDS]: waits until FILE has a line matching the
# extended regex PATTERN; fails after SECONDS (60) saying so, never goes on
# (a loaded CI machine once took over 10 s to reach a step: the test then
# raced a command that had not started).
wait_output() {
  local i
  for ((i = 0; i < ${3:-60} * 10; i++)); do
    grep -qE -- "$2" "$1" 2>/dev/null && return 0
    nap 0.1
  done
  fail "no '$2' in $1 within ${3:-60} s: $(tail -c 400 "$1" 2>/dev/null)"
}

# hold_port PORT: a process of the controller's host listens on 127.0.0.1:PORT
# (0: a port the kernel picks) until release_port or the test's end. Sets
# HELD_PORT once it listens; waited for, never assumed (python's start-up
# took over 10 s on a loaded CI machine, and a plan then saw the port free).
hold_port() {
  rm -f "$WORK/held-port"
  python3 -c 'import os, socket, sys, time
parent = os.getppid()
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen()
open(sys.argv[2] + ".tmp", "w").write(str(s.getsockname()[1]))
os.rename(sys.argv[2] + ".tmp", sys.argv[2])
while os.getppid() == parent: time.sleep(1)' "$1" "$WORK/held-port" >/dev/null 2>&1 &
  HELD_PID=$!
  local _
  for _ in $(seq 600); do
    [[ -s $WORK/held-port ]] && break
    kill -0 "$HELD_PID" 2>/dev/null || break  # it could not listen (port taken)
    nap 0.1
  done
  [[ -s $WORK/held-port ]] || fail "nothing listened on port $1 (the listener exited, or 60 s passed)"
  # shellcheck disable=SC2034 # read by the tests that source this file
  HELD_PORT=$(<"$WORK/held-port")
}
release_port() {
  kill "$HELD_PID" 2>/dev/null || true
  wait "$HELD_PID" 2>/dev/null || true
}

# fleet with the test repo; output in $WORK/out and $WORK/err.
fl() {
  local rc=0
  "$FLEET" -C "$REPO" --no-color "$@" >"$WORK/out" 2>"$WORK/err" </dev/null || rc=$?
  cat "$WORK/out" "$WORK/err" >>"$WORK/transcript"  # every word fleet said, for leak checks
  return $rc
}
# expect_rc CODE fleet-args...: runs fl and checks the exit code.
expect_rc() {
  local want=$1 rc=0
  shift
  fl "$@" || rc=$?
  [[ $rc == "$want" ]] || fail "fleet $* exited $rc, expected $want"
}
expect_out() { grep -qF -- "$1" "$WORK/out" "$WORK/err" || fail "output lacks: $1"; }
expect_no_out() { ! grep -qF -- "$1" "$WORK/out" "$WORK/err" || fail "output has: $1"; }
no_crash() {
  ! grep -qE 'terminate called|Segmentation|Aborted|internal error|what\(\)' "$WORK/out" "$WORK/err" ||
    fail "crash in output"
}

# The container engine the nodes run (fleet-sim start --engine): tests of
# images, deployments and display RAM are registered once per engine
# (tests/meson.build). CE is the node-side CLI tests call directly.
# podman-api: podman with its API service running on every node (fleet
# then lists containers and images through it; see fleet-sim --engine).
ENGINE=${FLEET_TEST_ENGINE:-podman}
case $ENGINE in podman | podman-api | docker | mixed) ;; *) echo "FLEET_TEST_ENGINE: podman, podman-api, docker or mixed" >&2; exit 1 ;; esac
CE=${ENGINE%-api}
[[ $CE == mixed ]] && CE=podman
if [[ $ENGINE != podman* ]] && ! command -v dockerd >/dev/null; then
  echo "SKIP: dockerd not installed (apt-get install docker.io)"
  exit 77
fi
# engine_free_phase: whether a phase that does not exercise the container
# engine (a node's SSH or power lost, a plan or validate error, a token's
# handling) runs in this run: on podman (X_test), not once more on docker
# (X_docker_test, there for what the engine does: run, replace, stop, health,
# logs, group restarts); FLEET_TEST_FULL=1 runs every phase on docker too.
engine_free_phase() { [[ $ENGINE == podman* || -n ${FLEET_TEST_FULL:-} ]]; }
# ce_exists NODE image|container REF: the engine says it exists (0) or not (1);
# anything else (ssh failed) is another status. The CLI is the node's (sim.json).
ce_exists() {
  local cli
  cli=$(node_field "$1" engine)
  case $cli in
    podman) on_node "$1" "podman $2 exists $3" ;;
    *) on_node "$1" "docker $2 inspect $3 >/dev/null 2>&1" ;;
  esac
}
# ce NODE ARGS...: the node's own engine CLI (as a string for on_node).
ce() {
  local n=$1
  shift
  on_node "$n" "$(node_field "$n" engine) $*"
}

start_fleet() {  # start_fleet N [fleet-sim start options]
  local n=$1
  shift
  "$SIM" start "$SIMDIR" --nodes "$n" --engine "$ENGINE" "$@" >"$WORK/sim.log" 2>&1 || {
    cat "$WORK/sim.log" >&2
    fail "fleet-sim start"
  }
}
mkrepo() { python3 "$ROOT/tests/integration/mkrepo.py" --sim "$SIMDIR" --out "$REPO" "$@"; }

state_file() { echo "$REPO/.fleet/state.json"; }
state_serial() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["serial"])' "$(state_file)"; }
state_parses() { python3 -c 'import json,sys; json.load(open(sys.argv[1]))' "$1"; }
node_root() { node_field "$1" root; }
param() { cat "$(node_root "$1")/sys/module/nvidia_drm/parameters/$2"; }
# node_field NAME FIELD (from sim.json): read from a table of every node's
# fields that one python3 writes when sim.json changes. on_node asks for 3
# fields per call, and a python3 start costs ~60 ms of CPU on a loaded
# 2-core CI machine: a python3 per field was a tenth of the suite's CPU.
node_field() {
  local table="$SIMDIR/.node_fields" snap="$SIMDIR/.node_fields.$BASHPID" n f v
  if [[ ! -f $table || $SIMDIR/sim.json -nt $table ]]; then
    # The table takes the mtime of the copy it was read from: a sim.json
    # rewritten since is newer, and read again.
    cp -p "$SIMDIR/sim.json" "$snap" && python3 -c '
import json, sys
for n in json.load(open(sys.argv[1]))["nodes"]:
    for k, v in n.items():
        if not isinstance(v, (dict, list)):
            print("%s\t%s\t%s" % (n["name"], k, v))' "$snap" >"$snap.t" &&
      touch -r "$snap" "$snap.t" && mv -f "$snap.t" "$table"
    local rc=$?
    rm -f "$snap" "$snap.t"
    ((rc == 0)) || return 1
  fi
  while IFS=$'\t' read -r n f v; do
    [[ $n == "$1" && $f == "$2" ]] && { printf '%s\n' "$v"; return 0; }
  done <"$table"
  echo "node_field: no field $2 of node $1 in $SIMDIR/sim.json" >&2
  return 1
}
on_node() {  # on_node NAME COMMAND: runs COMMAND as the node user over ssh
  local name=$1
  shift
  ssh -q -o BatchMode=yes -o StrictHostKeyChecking=yes -o KexAlgorithms=curve25519-sha256 \
    -o UserKnownHostsFile="$SIMDIR/known_hosts" -i "$SIMDIR/id_ed25519" \
    -p "$(node_field "$name" port)" "$(node_field "$name" user)@$(node_field "$name" address)" "$@"
}

# engine_stand_in NODE PATTERN ACTION: a stand-in for NODE's engine CLI in
# its /srv/bin (first on the node's PATH): a call whose arguments ("$*")
# match PATTERN (a case pattern as sh source: quote its spaces) run the sh
# code ACTION instead; every other call reaches the real CLI.
# engine_stand_in_off NODE removes it.
engine_stand_in() {
  local cli path
  cli=$(node_field "$1" engine)
  path=$(node_root "$1")/bin/$cli
  printf '#!/bin/sh\ncase "$*" in\n%s)\n%s\n;;\nesac\nPATH=/usr/local/bin:/usr/bin:/bin exec %s "$@"\n' \
    "$2" "$3" "$cli" >"$path"
  chmod 755 "$path"
}
engine_stand_in_off() { rm -f "$(node_root "$1")/bin/$(node_field "$1" engine)"; }
# ENGINE_DOWN: an ACTION for engine_stand_in: the engine cannot answer.
# shellcheck disable=SC2034 # read by the tests that source this file
ENGINE_DOWN='echo "Cannot connect to the engine: storage is locked (fleet test)" >&2; exit 125'

# After an apply: plan shows nothing to do, and a second apply changes
# nothing, not even the serial.
assert_converged() {
  local serial
  expect_rc 0 plan --detailed-exitcode
  serial=$(state_serial)
  expect_rc 0 apply --auto-approve
  expect_out "No changes"
  [[ $(state_serial) == "$serial" ]] || fail "second apply bumped serial $serial -> $(state_serial)"
}
