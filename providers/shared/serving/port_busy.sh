#!/bin/sh
# Whether a TCP port is listened on, on the node: "port_busy=1" or
# "port_busy=0", from /proc/net/tcp and tcp6 (a listener's state is 0A).
# cat first: mawk stops at a missing file (no tcp6 where IPv6 is off).
# Embedded in fleet at build time (kPortBusyScript) and run after
# `pb_port=HEX` (the port as 4 uppercase hex digits, as /proc spells it).
cat /proc/net/tcp /proc/net/tcp6 2>/dev/null |
  awk -v p="${pb_port?}" '$4 == "0A" { n = split($2, a, ":"); if (a[n] == p) f = 1 } END { print "port_busy=" (f ? 1 : 0) }'
