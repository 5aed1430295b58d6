#!/bin/sh
# Apply's re-check of a direct fabric route, on one of its nodes:
#   frc_what=address  exit 0 when an interface of the node has the IPv4
#                     address frc_addr, else 1 (the target's side)
#   frc_what=route    exit 0 when the node has a route to frc_addr, else
#                     ip's status (the source's side)
# A node without ip(8) cannot tell: exit 0, and the copy finds out.
# Embedded in fleet at build time (kFabricRouteCheckScript) and run after
# one assignment a value, frc_what and frc_addr (quoted once by fleet).
command -v ip >/dev/null 2>&1 || exit 0
case ${frc_what?} in
  address)
    ip -4 -o addr show 2>/dev/null |
      awk -v a="${frc_addr?}" '{ split($4, p, "/"); if (p[1] == a) f = 1 } END { exit !f }'
    ;;
  route)
    ip route get "${frc_addr?}" >/dev/null 2>&1
    ;;
esac
