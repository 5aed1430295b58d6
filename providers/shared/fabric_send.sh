#!/bin/sh
# The source side of a fabric stream: SOURCE_CMD's output sent over TLS 1.3
# (openssl s_client, external PSK) to the listener (fabric_listen.sh) at
# ADDRESS:PORT.
#   sh -c SCRIPT fleet-fabric-send ADDRESS PORT IDENTITY TIMEOUT_S CONNECT_TIMEOUT_S STALL_S SOURCE_CMD
# Embedded in fleet at build time (kFabricSendScript); fleet quotes each
# argument once (ShellCommand). stdin: the PSK session file; no secret is on
# a command line. SOURCE_CMD is shell text, eval'd in a subshell with stdin
# /dev/null (other fds, e.g. a relay's fd 3, pass through).
# Exit status: 0 sent whole; 75 could not connect (no byte sent); 76 the
# source failed before a connection was made (no byte sent either); 74 the
# receiver answered nothing for STALL_S s (kFabricUnconnectedExit,
# kFabricSourceFailedUnconnectedExit, kFabricStalledExit in
# fabric_stream.h, which fabric_stream_test checks against this file).
a=$1
port=$2
id=$3
to=$4
cto=$5
stall=$6
scmd=$7
set --
job=
sw=
umask 077
# A 0700 temp dir, removed on any exit (s_client and the stall watch
# stopped first), also on HUP/INT/TERM and on SIGPIPE (see
# fabric_listen.sh). The cleanup writes nowhere.
d=$(mktemp -d "${TMPDIR:-/tmp}/fleet-fabric.XXXXXX") || exit 1
# shellcheck disable=SC2016 # expanded when the trap runs
trap 'exec >/dev/null 2>&1; [ -z "$job" ] || kill $job; [ -z "$sw" ] || kill -9 $sw; rm -rf "$d"' EXIT
trap 'exit 143' HUP INT PIPE TERM
cat >"$d/psk" || exit 1

# The source; when it fails ($r), s_client is stopped before it sees its
# input end, so the stream ends without close_notify and the target side
# fails, instead of taking a truncated payload for a whole one.
# $d/cpid is s_client's own pid (sh execs it), not timeout's: a TERM that
# reached timeout while it forked ended timeout alone, and the s_client it
# had just started then saw its input end and closed the stream cleanly, a
# failed source delivered as empty.
# shellcheck disable=SC2016 # s_client's shell expands its own words
{
  (
    eval "$scmd"
  ) </dev/null 2>"$d/serr"
  r=$?
  echo $r >"$d/rc"
  if [ $r != 0 ]; then
    i=0
    until [ -s "$d/cpid" ] || [ $i -gt 250 ]; do
      sleep 0.02
      i=$((i + 1))
    done
    p=$(cat "$d/cpid" 2>/dev/null)
    if [ -n "$p" ] && kill "$p" 2>/dev/null; then
      : >"$d/aborted"
      while kill -0 "$p" 2>/dev/null; do sleep 0.02; done
    fi
  fi
} | d="$d" id="$id" a="$a" port="$port" timeout "$to" sh -c 'echo $$ >"$d/cpid"
  exec openssl s_client -state -quiet -no_ign_eof -nocommands -tls1_3 \
    -ciphersuites TLS_AES_128_GCM_SHA256 -psk_session "$d/psk" -psk_identity "$id" \
    -connect "$a:$port"' >/dev/null 2>"$d/cerr" &
job=$!

# Connected once s_client starts its handshake (-state prints
# "SSL_connect:" on stderr, unbuffered); no payload byte can leave before
# that. Not within cto s: s_client is stopped.
n=0
until grep -q '^SSL_connect:' "$d/cerr" 2>/dev/null; do
  kill -0 $job 2>/dev/null || break
  [ $n -lt $((cto * 20)) ] || {
    kill $job 2>/dev/null
    break
  }
  sleep 0.05
  n=$((n + 1))
done

# While s_client runs: its connection's line in /proc/net/tcp (remote
# address and port as the kernel prints them on a little-endian host, state
# 01) showing retransmissions ($7) or window probes ($9) that got no answer,
# for `stall` samples a second apart in a row, stops it. An answer resets
# both counters, so a slow receiver (a zero window, answered) never counts;
# only silence does. It is stopped with KILL: a TERM that comes while the
# forked shell still has its parent's trap handler is lost. It holds no fd
# of the caller's (a relay's pipes, the channel), so its last `sleep` delays
# nobody's end of file.
# shellcheck disable=SC2086 # $a split at its dots, the tcp line at blanks
rem=$(
  IFS=.
  set -- $a
  printf '%02X%02X%02X%02X:%04X' "$4" "$3" "$2" "$1" "$port"
)
# shellcheck disable=SC2046 # the tcp line's fields, cpid's one pid
(
  n=0
  while sleep 1 && [ -d "$d" ]; do
    set -- $(grep -m 1 " $rem 01 " /proc/net/tcp)
    if [ $# -ge 9 ] && { [ "$7" != 00000000 ] || [ "$9" != 0 ]; }; then n=$((n + 1)); else n=0; fi
    [ $n -lt "$stall" ] || {
      : >"$d/stalled"
      kill $(cat "$d/cpid")
      exit 0
    }
  done
) </dev/null >/dev/null 2>&1 3>&- 4>&- 5>&- 6>&- 7>&- 8>&- 9>&- &
sw=$!

wait $job 2>/dev/null
crc=$?
job=
kill -9 $sw 2>/dev/null
sw=
wait 2>/dev/null
if [ -e "$d/stalled" ]; then
  echo "fabric: $a:$port answered nothing for $stall s: that node or its link is gone; stopped sending" >&2
  exit 74
fi
# Stopped above because the source failed while s_client ran. Not when it
# died of SIGPIPE (141) before any connection: then s_client had already
# given up on connecting (its exit broke the pipe), and that is the failure
# to report.
conn=
grep -q '^SSL_connect:' "$d/cerr" 2>/dev/null && conn=1
if [ -e "$d/aborted" ] && { [ -n "$conn" ] || [ "$(cat "$d/rc")" != 141 ]; }; then
  echo "the source command exited $(cat "$d/rc"): $(head -c 600 "$d/serr")" >&2
  [ -n "$conn" ] || exit 76
  exit 1
fi
if [ -z "$conn" ]; then
  why=$(grep -e 'errno=' -e 'BIO_connect:' "$d/cerr" | tail -n 1 | head -c 300)
  echo "fabric: could not connect to $a:$port within $cto s${why:+ ($why)}; no byte was sent" >&2
  exit 75
fi
src=$(cat "$d/rc" 2>/dev/null)
if [ "$src" != 0 ]; then
  echo "the source command exited ${src:-?}: $(head -c 600 "$d/serr")" >&2
  exit 1
fi
if [ $crc != 0 ]; then
  echo "fabric: sending to $a:$port failed (exit $crc): $(grep -v -e SSL_get_servername -e '^DONE' -e '^SSL_connect:' -e '^SSL3 alert write:warning' "$d/cerr" | head -c 600)" >&2
  exit 1
fi
