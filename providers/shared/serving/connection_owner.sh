#!/bin/sh
# Whether the smoke check's own connection to a serve's port is held by the
# serve's recorded container: the check's answer came from that container,
# not from another program on the port. Embedded in fleet at build time
# (kConnectionOwnerScript) and run as
# `sh -c SCRIPT fleet-connection-owner LOCAL REMOTE SSH_PORT CLI CONTAINER
#  LABEL API_GET` (every argument quoted once by fleet):
#   LOCAL, REMOTE  ":%04X" of the serve's port and of the client's port, as
#                  the ends of a line of /proc/net/tcp read
#   SSH_PORT       the controller's end of this SSH session (0: unknown)
#   CLI CONTAINER  the container CLI and the recorded container
#   LABEL          the deployment label whose value names the serve
#   API_GET        the engine API's GET of the container (node provider's
#                  EngineSocketScript + ProbeApiGetScript): sets $co_api to 1
#                  when the API answered 200, the answer in $co_out
# Prints inode=, pid=, label= and owner= (container, other, unknown, absent
# or stopped), and via_nat=ADDRESS or via=engine when that is how it knew.
local_end=$1 remote_end=$2 ssh_port=$3 cli=$4 container=$5 label_key=$6 api_get=$7
inode=''
chex=''
# Behind NAT (a laptop, a VPN) the node sees another source port than the
# controller's. It shows on the SSH session too: the node's SSH_CONNECTION
# names another port than the controller's end of it (SSH_PORT). Only
# then, after a few tries without the exact connection, a connection to the
# serve's port from the address the node sees the session come from counts,
# still only when the recorded container holds it. A client address that
# reaches another box gives this node no connection at all, NAT or not.
# shellcheck disable=SC2086 # split on purpose: "ADDRESS PORT ADDRESS PORT"
set -- ${SSH_CONNECTION:-}
if [ -n "${2:-}" ] && [ "$2" != "$ssh_port" ] && [ "$ssh_port" != 0 ]; then
  cip=$1
  case ${cip##*:} in
    *.*.*.*)
      o=$IFS
      IFS=.
      # shellcheck disable=SC2086 # split on purpose: the IPv4's four parts
      set -- ${cip##*:}
      IFS=$o
      chex=$(printf '%02X%02X%02X%02X' "$4" "$3" "$2" "$1")
      ;;
  esac
fi
# A connection waiting in the listener's queue shows inode 0 until the
# serve's process accepts it, which a loaded node may take seconds to do:
# such a one is waited for up to ~6 s. One the node does not show at all
# after ~1 s is not coming.
i=0
while [ "$i" -lt 60 ]; do
  i=$((i + 1))
  inode=$(awk -v l="$local_end" -v r="$remote_end" \
    'FNR>1 && substr($2,length($2)-4)==l && substr($3,length($3)-4)==r {print $10; exit}' \
    /proc/net/tcp /proc/net/tcp6 2>/dev/null | head -n 1)
  [ -n "$inode" ] && [ "$inode" != 0 ] && break
  if [ -n "$chex" ] && [ "$i" -ge 3 ]; then
    inode=$(awk -v l="$local_end" -v h="$chex" \
      'FNR>1 && $4=="01" && $10!=0 && substr($2,length($2)-4)==l {a=$3; sub(/:.*/,"",a); if (a==h || a=="0000000000000000FFFF0000" h) s=s (s=="" ? "" : "|") $10} END {print s}' \
      /proc/net/tcp /proc/net/tcp6 2>/dev/null)
    [ -n "$inode" ] && {
      echo "via_nat=$cip"
      break
    }
  fi
  [ -z "$inode" ] && [ "$i" -ge 10 ] && break
  sleep 0.1
done
echo "inode=$inode"
# The pid and the label from the engine's API where it answers (the shell
# cuts them out of its JSON: "Pid" is State's alone, and a key inside a
# string would be escaped), else one CLI inspect for both (a CLI start is
# ~50-95 ms of a node's CPU).
co_api='' co_out=''
eval "$api_get"
pl=''
if [ -n "$co_api" ]; then
  pid=${co_out#*'"Pid":'}
  pid=${pid%%[!0-9]*}
  label=${co_out#*"\"$label_key\":\""}
  if [ "$label" = "$co_out" ]; then label=''; else label=${label%%'"'*}; fi
  pl="${pid:-0} $label"
fi
[ -n "$pl" ] || pl=$("$cli" container inspect --format \
  "{{.State.Pid}} {{index .Config.Labels \"$label_key\"}}" "$container" 2>/dev/null)
pid=${pl%% *}
label=''
case $pl in *' '*) label=${pl#* } ;; esac
echo "pid=$pid"
echo "label=$label"
# `-ef` (the same namespace inode) is the shell's own test: a readlink per
# process would start hundreds on a busy node.
ns=/proc/$pid/ns/pid
owner=unknown
if [ -n "$inode" ] && [ "$inode" != 0 ] && [ -n "$pid" ] && [ -e "$ns" ]; then
  owner=other
  fds=''
  for p in /proc/[0-9]*; do
    # shellcheck disable=SC3013 # -ef: dash's and bash's test have it
    [ "$p/ns/pid" -ef "$ns" ] && fds="$fds $p/fd"
  done
  # One ls for all of them: their fds' targets name the socket.
  # shellcheck disable=SC2086,SC2010 # $fds: /proc/PID/fd words; ls -l for the link targets
  if [ -n "$fds" ] && ls -l $fds 2>/dev/null | grep -qE "socket:\[($inode)\]"; then
    owner=container
  fi
fi
# A root daemon's container (docker): the node user cannot read its
# processes, but the engine can look among them (exec runs in the
# container's PID namespace, as its user). No shell there: left unknown.
if [ "$owner" = unknown ] && [ -n "$inode" ] && [ "$inode" != 0 ] && [ -n "$pid" ] &&
  [ "$pid" != 0 ]; then
  # shellcheck disable=SC2016 # $p and $1 are the container shell's
  held=$("$cli" exec "$container" sh -c \
    'for p in /proc/[0-9]*; do ls -l "$p"/fd 2>/dev/null; done | grep -cE "socket:\[($1)\]"' \
    sh "$inode" 2>/dev/null)
  case $held in
    '' | *[!0-9]*) ;;
    0) owner=other ;;
    *)
      owner=container
      echo via=engine
      ;;
  esac
fi
if [ -z "$inode" ]; then
  owner=absent
elif [ -z "$pid" ] || [ "$pid" = 0 ]; then
  owner=stopped
fi
echo "owner=$owner"
