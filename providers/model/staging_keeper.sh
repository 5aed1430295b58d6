#!/bin/sh
# The staging lock's keeper, one per apply that stages a model into a
# cache: takes the lock (a folder holding its owner line, renamed into
# place), or takes over a stale one, prints "acquired\tOWNER\tTOOK" or
# "held\tOWNER" (exit 75), then lives until the lock goes or its channel
# closes (a "." line a second: a write that fails ends it, and its trap
# removes the lock). Exit 73: the cache cannot be written.
# `t`: an owner line whose fleet process the controller found gone; a lock
# still held under exactly that line has its keeper ended first (its trap
# would remove the lock under us otherwise). A pid in an owner line is
# judged only on the node, boot and pid namespace that wrote it; a lock is
# only ever moved away while it still holds the owner line judged (another
# apply may have taken it in between).
# Embedded in fleet at build time (kStagingKeeperScript) and run as the
# channel's own shell (its $$ is the pid in the owner line), after one
# assignment per value, quoted once by fleet:
#   c  the hub cache folder      l    the lock folder in it
#   ctl  this controller's id    t    the owner line to take over, or ""
: "${c?}" "${l?}" "${ctl?}" "${t?}"
set -f
mkdir -p -- "$c" || exit 3
b=$(cat /proc/sys/kernel/random/boot_id 2>/dev/null); [ -n "$b" ] || b=-
h=$(uname -n)
n=$(readlink /proc/self/ns/pid 2>/dev/null | tr -cd 0-9); [ -n "$n" ] || n=-
me="$$ $h $b $(date +%s) $ctl $n"
tmp="$c/.fleet-newlock.$$"
# alive PID: its /proc entry is there and it is not a zombie (a stat this
# user may not read, as under hidepid, counts as alive).
alive() { [ -d "/proc/$1" ] && [ "$(sed 's/.*) //; s/ .*//' "/proc/$1/stat" 2>/dev/null)" != Z ]; }
# owner_of DIR: its owner line, at most 512 bytes ("" if none), in o.
owner_of() { o=; [ -r "$1/owner" ] && { IFS= read -r o < "$1/owner" || :; }; o=$(printf '%.512s' "$o"); }
# fresh: the lock made ours, born with its owner line (a folder renamed into
# place: a crash can no longer leave a lock without an owner). 0: taken,
# 1: there already, 2: cannot write here ($e says why).
fresh() {
  rm -rf -- "$tmp"
  e=$(mkdir -- "$tmp" 2>&1) || return 2
  e=$( { printf '%s\n' "$me" > "$tmp/owner"; } 2>&1) || { rm -rf -- "$tmp"; return 2; }
  # -n: renameat2(RENAME_NOREPLACE), which replaces no folder, not even an
  # empty one; it exits 0 either way, so the folder left tells.
  mv -n -T -- "$tmp" "$l" 2>/dev/null; [ -e "$tmp" ] || return 0
  rm -rf -- "$tmp"; return 1
}
# retake OWNER: the lock, if it still holds OWNER, moved away and made ours.
retake() {
  mv -n -T -- "$l" "$l.stale.$$" 2>/dev/null; [ -d "$l.stale.$$" ] || return 1
  w=$1; owner_of "$l.stale.$$"
  [ "$o" = "$w" ] || { mv -n -T -- "$l.stale.$$" "$l" 2>/dev/null; o=$w; return 1; }
  o=$w; rm -rf -- "$l.stale.$$"; fresh
}
# Folders of keepers a crash stopped between their mkdir and rename.
find "$c" -maxdepth 1 -name '.fleet-newlock.*' -mmin +1 -exec rm -rf -- {} + 2>/dev/null
took=
fresh; r=$?
# Cannot write here: an error, unless the lock is there (then report it).
[ $r != 2 ] || [ -d "$l" ] || { printf '%s\n' "$e" >&2; exit 73; }
if [ $r != 0 ]; then
  owner_of "$l"
  # shellcheck disable=SC2086 # the owner line's fields (set -f: no globs)
  set -- $o
  here=; [ "$2" = "$h" ] && [ "${6:-$n}" = "$n" ] && here=1
  case $1 in ''|*[!0-9]*) here= ;; esac
  ok=
  if [ -z "$o" ]; then
    # An older fleet's lock (it wrote the owner after its mkdir): give its
    # holder a minute, or none if the node booted since.
    boot=$(awk '/^btime/{print $2}' /proc/stat 2>/dev/null)
    { [ -n "$(find "$l" -maxdepth 0 -mmin +1 2>/dev/null)" ] ||
      [ "$(stat -c %Y -- "$l" 2>/dev/null || echo 0)" -lt "${boot:-0}" ]; } && retake "" && ok=1
  elif [ -n "$here" ] && { [ "$3" != "$b" ] || ! alive "$1"; }; then
    retake "$o" && ok=1
  elif [ -n "$here" ] && [ -n "$t" ] && [ "$o" = "$t" ]; then
    kill -TERM "$1" 2>/dev/null; i=0
    while alive "$1" && [ $i -lt 50 ]; do i=$((i+1)); sleep 0.1; done
    # Its trap removed the lock (then fresh), or it had none (then retake).
    ! alive "$1" && { fresh || retake "$o"; } && ok=1
  fi
  [ -n "$ok" ] || { printf 'held\t%s\n' "$o"; exit 75; }
  took=${o:-"(no owner)"}
fi
trap 'rm -rf -- "$l"; exit 0' EXIT HUP INT TERM PIPE
printf 'acquired\t%s\t%s\n' "$me" "$took"
# sleep holds none of the channel's fds: its last second delays nobody's end of file.
# shellcheck disable=SC2217
while [ -d "$l" ]; do sleep 1 </dev/null >/dev/null 2>&1 & wait $!; printf '.\n' || exit 0; done
