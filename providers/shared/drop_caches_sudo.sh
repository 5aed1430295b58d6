#!/bin/sh
# On a unified-memory node (the fleet-probe's JSON in $gpj says so): may
# this user run `sysctl vm.drop_caches=3` with `sudo -n`? Prints
# drop_caches_sudo_user=, drop_caches_sudo_command= and
# drop_caches_sudo=allowed|refused|no-sudo. Only there: a process on the
# node costs a plan a few ms, and a discrete GPU's memory holds no page
# cache.
# Embedded in fleet at build time (kDropCachesSudoScript) and run inside the
# node facts probe's own shell after node_gpu.sh set $gpj; takes no values.
case ${gpj-} in *'"unified_memory":true'*)
  dcs_p=$(command -v sysctl 2>/dev/null) || dcs_p=/usr/sbin/sysctl
  printf 'drop_caches_sudo_user=%s\ndrop_caches_sudo_command=%s vm.drop_caches=3\n' "$(id -un)" "$dcs_p"
  if ! command -v sudo >/dev/null 2>&1; then
    echo drop_caches_sudo=no-sudo
  elif sudo -n -l "$dcs_p" vm.drop_caches=3 >/dev/null 2>&1; then
    echo drop_caches_sudo=allowed
  else
    echo drop_caches_sudo=refused
  fi
  ;;
esac
