#!/bin/sh
# The target side of a fabric stream: a TLS 1.3 listener (openssl s_server,
# external PSK) on ADDRESS whose payload goes into TARGET_CMD.
#   sh -c SCRIPT fleet-fabric-listen ADDRESS IDENTITY TIMEOUT_S ACCEPT_TIMEOUT_S TARGET_CMD [FORWARD_CMD]
# Embedded in fleet at build time (kFabricListenScript); fleet quotes each
# argument once (ShellCommand). stdin: the PSK session file (one PEM, two in
# a chain: this hop's, then the next one's); no secret is on a command line.
# Prints "FLEET-FABRIC-READY PORT" once it listens, then heartbeats
# ("FLEET-FABRIC-WAIT") that fleet drops; a heartbeat that cannot be written
# (the channel gone) stops it.
# TARGET_CMD is shell text, eval'd in a subshell of this script: it may read
# $d (this listener's private dir), $a and $port.
# FORWARD_CMD, in a chain's middle hop: a command (FabricSendScript's) that
# sends on to the next hop what it reads on fd 3, run with $up set to $d;
# the payload then goes through `tee -p` to TARGET_CMD and to it.
a=$1
id=$2
to=$3
ato=$4
tcmd=$5
fwd=${6-}
set --
wd=
umask 077
# A 0700 temp dir, removed on any exit (the listener and the watchdog
# stopped first), also on HUP/INT/TERM and on SIGPIPE (the channel gone:
# the shell may write to it, e.g. dash's "Terminated" for a killed child;
# untrapped, SIGPIPE would end it before its cleanup). The cleanup writes
# nowhere.
d=$(mktemp -d "${TMPDIR:-/tmp}/fleet-fabric.XXXXXX") || exit 1
# shellcheck disable=SC2016,SC2046 # expanded when the trap runs; spid holds one pid
trap 'exec >/dev/null 2>&1; [ -e "$d/rc" ] || kill $(cat "$d/spid"); [ -z "$wd" ] || kill $wd; rm -rf "$d"' EXIT
trap 'exit 143' HUP INT PIPE TERM
cat >"$d/psk" || exit 1
mkfifo "$d/in" || exit 1

# A middle hop's target: TARGET_CMD fed by `tee -p`, whose copy goes to the
# next hop (FORWARD_CMD), keyed by the second PEM of stdin. Exits with
# TARGET_CMD's status; a failed forward is one stderr line
# "fabric-forward: ...". tee alone holds the write ends of both its
# outputs: the forward (the FIFO $d/fw) sees its end of file when the
# stream into this hop ends, not when this hop's TARGET_CMD does (podman
# load imports after its input ends: each hop's import held up the hops
# behind it, one after another), and TARGET_CMD does not wait for the
# forward either. tee's own process opens the FIFO (fd 4): a tee that cannot
# start still releases the forward's open, which then ends and says so.
relay() {
  awk '/^-----BEGIN/ { n++ } n == 2' "$d/psk" >"$d/psk2" || exit 1
  mkfifo "$d/fw" || exit 1
  { (
    up=$d
    export up
    eval "$fwd"
  ) 3<"$d/fw" <"$d/psk2" >/dev/null 2>"$d/ferr"; echo $? >"$d/frc"; } &
  fwj=$!
  { tee -p /dev/fd/4 4>"$d/fw"; echo $? >"$d/trc"; } | (
    eval "$tcmd"
  )
  lrc=$?
  wait $fwj
  frc=$(cat "$d/frc" 2>/dev/null)
  [ "$frc" = 0 ] || echo "fabric-forward: exit ${frc:-?}: $(tr '\n' ' ' <"$d/ferr" | head -c 600)" >&2
  # tee -p exits 0 when an output's reader went (a target or a forward
  # that failed); any other status cut this hop's stream.
  trc=
  { read -r trc <"$d/trc"; } 2>/dev/null
  [ "$trc" = 0 ] || {
    echo "fabric: this hop's tee exited ${trc:-?}" >&2
    [ $lrc != 0 ] || lrc=1
  }
  exit $lrc
}

# A free port: not in /proc/net/tcp{,6} (a race with another program only
# makes the listener fail to start, which is reported).
port=
for i in 1 2 3 4 5 6 7 8 9 10; do
  p=$(($(od -An -N2 -tu2 /dev/urandom | tr -d ' ') % 28000 + 32000))
  grep -q "$(printf ':%04X ' "$p")" /proc/net/tcp /proc/net/tcp6 2>/dev/null || {
    port=$p
    break
  }
done
[ -n "$port" ] || {
  echo 'fabric: no free port' >&2
  exit 1
}
# TLS 1.3 only, the external PSK's suite (its hash must match the sender's).
# stdin: a FIFO opened read-write never has data nor EOF (s_server closes
# the connection at EOF on its stdin). $d/rc is renamed into place: whoever
# sees it (a relay's forward) reads its whole value.
{
  timeout "$to" openssl s_server -quiet -nocert -naccept 1 \
    -tls1_3 -ciphersuites TLS_AES_128_GCM_SHA256 -psk_session "$d/psk" -psk_identity "$id" \
    -accept "$a:$port" 0<>"$d/in" 2>"$d/err" &
  echo $! >"$d/spid"
  wait $!
  echo $? >"$d/rc.w"
  mv "$d/rc.w" "$d/rc"
} | (
  if [ -n "$fwd" ]; then relay; else eval "$tcmd"; fi
) &
job=$!

# Fails when the listener did not come up (~10 s). Polled every 10 ms for
# its first 0.1 s, then every 50: s_server listens ~30-40 ms after its
# start, and a chain starts its listeners one after another, so each
# listener's ready line came ~22 ms sooner than with 50 ms throughout
# (55-62 ms against 82-86: the listen script alone, 6 runs each).
listen=$(printf ':%04X 00000000:0000 0A' "$port")
i=0
until grep -q "$listen" /proc/net/tcp 2>/dev/null; do
  i=$((i + 1))
  if [ $i -gt 200 ] || ! kill -0 $job 2>/dev/null; then
    # shellcheck disable=SC2046 # spid holds one pid
    kill $(cat "$d/spid" 2>/dev/null) 2>/dev/null
    wait $job 2>/dev/null
    echo "fabric: no listener came up on $a:$port: $(head -c 600 "$d/err" 2>/dev/null)" >&2
    exit 1
  fi
  if [ $i -le 10 ]; then sleep 0.01; else sleep 0.05; fi
done
echo "FLEET-FABRIC-READY $port"

# A heartbeat line every 0.5 s until a connection comes, then every second
# until the stream ends (a write that fails, the channel gone, stops the
# listener); nobody within ato s: the listener is stopped.
est=$(printf ':%04X [0-9A-F]*:[0-9A-F]* 01' "$port")
# shellcheck disable=SC2046 # spid holds one pid
(
  trap '' PIPE
  n=0
  beat() { printf 'FLEET-FABRIC-WAIT\n' || {
    kill $(cat "$d/spid")
    exit 0
  }; }
  while [ $n -lt $((ato * 10)) ]; do
    if grep -q "$est" /proc/net/tcp; then
      until [ -e "$d/rc" ] || [ ! -d "$d" ]; do
        beat
        sleep 1 >/dev/null
      done
      exit 0
    fi
    [ $((n % 5)) != 0 ] || beat
    sleep 0.1 >/dev/null
    n=$((n + 1))
  done
  : >"$d/expired"
  kill $(cat "$d/spid")
) </dev/null 2>/dev/null &
wd=$!

wait $job
trc=$?
kill $wd 2>/dev/null
wd=
src=$(cat "$d/rc" 2>/dev/null)
err=$(grep -v -e 'SSL_get_servername' "$d/err" 2>/dev/null | head -c 600)
if [ -e "$d/expired" ]; then
  echo "fabric: nobody connected to $a:$port within $ato s; listener stopped" >&2
  exit 1
fi
if [ -n "$err" ] || [ "$src" != 0 ]; then
  echo "fabric: the stream did not end cleanly (listener exit ${src:-?}): $err" >&2
  [ $trc = 0 ] && trc=3
fi
exit $trc
