#!/bin/sh
# Whether sudo runs the node's poweroff command without asking for a
# password (a plan on a node with a switch asks: every plan may be a
# destroy's, and a power off that fails after the serves stopped is worse
# than a plan error). Defines the function poweroff_sudo; fleet calls it as
# `poweroff_sudo COMMAND ARG...` (the words after `sudo [-n]` in the
# node's poweroff command, each quoted once by fleet). It prints
#   poweroff_sudo_user=USER            who asks (`id -un`)
#   poweroff_sudo_command=PATH ARG...  the command as sudo sees it: the path
#                                      PATH gives, then the arguments
#   poweroff_sudo=allowed|refused|no-sudo
# Embedded in fleet at build time (kPoweroffSudoScript) and run inside the
# plan's node probe's own shell. Defines only the function and $pos_p.
poweroff_sudo() {
  pos_p=$(command -v "$1" 2>/dev/null) || pos_p=$1
  shift
  printf 'poweroff_sudo_user=%s\n' "$(id -un)"
  printf 'poweroff_sudo_command=%s' "$pos_p"
  [ "$#" = 0 ] || printf ' %s' "$@"
  echo
  if ! command -v sudo >/dev/null 2>&1; then
    echo poweroff_sudo=no-sudo
  elif sudo -n -l "$pos_p" "$@" >/dev/null 2>&1; then
    echo poweroff_sudo=allowed
  else
    echo poweroff_sudo=refused
  fi
}
