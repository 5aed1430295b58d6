#!/bin/sh
# Waits until the gateway's previous worker is gone: HAProxy's master (the
# container's first process) has one worker per config still running, the
# current one and an old one while it finishes the requests it carries.
# Read from /proc, as the engines' `top` differ. Exit 0 when at most one
# child is left (or the container has no running process); exit 3 after
# gwd_tries tries 0.25 s apart, printing how many are left.
# Embedded in fleet at build time (kGatewayWaitDrainedScript) and run after
# one assignment a value, quoted once by fleet:
#   gwd_cli        the container CLI
#   gwd_container  the gateway's container
#   gwd_tries      how many times to look
pid=$("${gwd_cli?}" container inspect --format '{{.State.Pid}}' "${gwd_container?}" 2>/dev/null)
[ -n "$pid" ] && [ -d "/proc/$pid" ] || exit 0
i=0
while :; do
  n=$(grep -ls "^PPid:[[:space:]]*$pid\$" /proc/[0-9]*/status 2>/dev/null | wc -l)
  [ "$n" -le 1 ] && exit 0
  i=$((i + 1))
  [ $i -ge "${gwd_tries?}" ] && { echo "$n"; exit 3; }
  sleep 0.25
done
