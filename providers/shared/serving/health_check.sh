#!/bin/sh
# The HTTP status of GET $hc_url, one line: "health=CODE health_tool=curl
# health_rc=RC" (000 when nothing answers; RC curl's exit: 28 when the 5 s
# ran out, a busy engine whose long prefill holds its one event loop, not a
# dead one, refused: 7), else "health=CODE health_tool=wget", else
# "health=none" when the node has neither. No proxy (the URL is the node's
# own loopback), one try, 5 s.
# Embedded in fleet at build time (kHealthCheckScript) and run inside the
# probe's own shell after `hc_url=URL` (quoted once by fleet). Defines only
# $hc_url: curl's answer is read in a subshell.
if command -v curl >/dev/null 2>&1; then
  (
    hc=$(curl -s -g --noproxy '*' -o /dev/null -w '%{http_code}' --max-time 5 "${hc_url?}" 2>/dev/null)
    echo "health=$hc health_tool=curl health_rc=$?"
  )
elif command -v wget >/dev/null 2>&1; then
  echo "health=$(wget -S -q -t 1 -O /dev/null -T 5 "${hc_url?}" 2>&1 | awk '/^ *HTTP\//{c=$2} END{printf "%03d", c+0}')" health_tool=wget
else
  echo health=none
fi
