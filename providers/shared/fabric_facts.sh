#!/bin/sh
# The node's RDMA ports, one line each:
#   fabric_port=HCA|PORT|STATE|NETDEV|RATE|GID|CIDR
# (STATE as sysfs prints it after "N: ", RATE in Gb/s, GID the index of the
# port's RoCE v2 GID of the netdev's first IPv4 or -1, CIDR that address).
# Embedded in fleet at build time (kFabricFactsScript) and run inside the
# node facts probe's own shell, after `fabric_sysfs=SYSFS` (quoted once by
# fleet; the node's /sys): no process more than its reads need.
# Sysfs files are read by the shell's `read`, not $(cat): every process
# costs a plan a few ms on the node. Reading the 256 GID entries of a port
# one at a time would cost as much: one grep finds the IPv4's GIDs instead.
fb=${fabric_sysfs?}/class/infiniband
for pd in "$fb"/*/ports/*; do
  [ -d "$pd" ] || continue
  hca=${pd%/ports/*}
  hca=${hca##*/}
  port=${pd##*/}
  st='' rate='' nd=''
  { read -r st <"$pd/state"; } 2>/dev/null
  st=${st#*: }
  { read -r rate <"$pd/rate"; } 2>/dev/null
  rate=${rate%% *}
  { read -r nd <"$pd/gid_attrs/ndevs/0"; } 2>/dev/null
  if [ -z "$nd" ]; then
    for n in "$fb/$hca/device/net/"*; do
      [ -e "$n" ] && {
        nd=${n##*/}
        break
      }
    done
  fi
  cidr=''
  [ -n "$nd" ] && command -v ip >/dev/null 2>&1 &&
    cidr=$(ip -4 -o addr show dev "$nd" 2>/dev/null)
  # The first address's CIDR: "3: NETDEV    inet A.B.C.D/N brd ...".
  case $cidr in
    *' inet '*)
      cidr=${cidr%%"
"*}
      cidr=${cidr#* inet }
      cidr=${cidr%% *}
      ;;
    *) cidr='' ;;
  esac
  gid=-1
  if [ -n "$cidr" ]; then
    o=${cidr%/*}
    o1=${o%%.*}
    o=${o#*.}
    o2=${o%%.*}
    o=${o#*.}
    o3=${o%%.*}
    o4=${o#*.}
    hex=$(printf '%02x%02x:%02x%02x' "$o1" "$o2" "$o3" "$o4")
    # Read as lines: a sysfs root (a test's) may hold a space.
    gid=$(grep -l ":ffff:$hex\$" "$pd"/gids/* 2>/dev/null | while IFS= read -r g; do
      i=${g##*/}
      ty=''
      { read -r ty <"$pd/gid_attrs/types/$i"; } 2>/dev/null
      if [ "$ty" = 'RoCE v2' ]; then
        echo "$i"
        break
      fi
    done)
    [ -n "$gid" ] || gid=-1
  fi
  printf 'fabric_port=%s|%s|%s|%s|%s|%s|%s\n' "$hca" "$port" "$st" "$nd" "$rate" "$gid" "$cidr"
done
