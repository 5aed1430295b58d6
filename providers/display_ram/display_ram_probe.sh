#!/bin/sh
# Reads the nvidia_drm module's state on the node and, where the module is
# not in the wanted mode, what a reload would meet. Embedded in fleet at
# build time (kDisplayRamProbeScript) and run as
# `sh -c SCRIPT fleet-display-ram MODULE PARAMS DEV` (a step's check), or in
# the plan's probe inside the probe's own shell (which it leaves running:
# no exit) after `set -- MODULE PARAMS DEV WANT CLI SERVING`
# (every argument quoted once by fleet):
#   MODULE   the module's name (nvidia_drm): the reloads sudo is asked about
#   PARAMS   the module's parameters folder (SYSFS/module/MODULE/parameters)
#   DEV      the node's /dev (DEV/dri/card*: the DRM device)
#   WANT     unlocked | default; without WANT (and CLI, SERVING) the module's
#            state is all that is read (a step's check before and after a
#            reload)
#   CLI      the container CLI whose serving containers a reload stops
#   SERVING  the shell command that lists them ("serving=NAME" lines, or the
#            engine API's answer), as the deployment provider builds it
# Prints key=value lines: loaded, modeset, fbdev (as the kernel prints them,
# Y/N), card0, boot_id; past a mode other than WANT also the serving
# containers (or engine_error=OUTPUT when the CLI cannot list them), the
# sudo checks (sudo_checked, modprobe_path, sudo_user, sudo_ok=ARGS per
# reload sudo allows without a password) and what holds the DRM device open
# (drm_systemctl, drm_holder=..., drm_unit=UNIT, drm_unit_sudo_ok=UNIT).
module=$1 p=$2 dev=$3
# The shell's own `read`, not $(cat ...): a process each costs a plan ~4 ms
# on every node.
dr_ms='' dr_fb='' dr_b=''
if [ -d "$p" ]; then
  { read -r dr_ms <"$p/modeset"; } 2>/dev/null
  { read -r dr_fb <"$p/fbdev"; } 2>/dev/null
  printf 'loaded=1\nmodeset=%s\nfbdev=%s\n' "$dr_ms" "$dr_fb"
else
  echo loaded=0
fi
if [ -e "$dev/dri/card0" ]; then echo card0=1; else echo card0=0; fi
{ read -r dr_b </proc/sys/kernel/random/boot_id; } 2>/dev/null
printf 'boot_id=%s\n' "$dr_b"
# The serving containers matter only to a reload: listed only when the
# module is not in the wanted mode (WANT given), so a converged plan does
# not start the container CLI on every node.
dr_m=default
[ "$dr_ms$dr_fb" = YN ] && dr_m=unlocked
if [ $# -gt 3 ] && [ "$dr_m" != "$4" ]; then
  want=$4 cli=$5 serving=$6

  # An installed CLI that cannot list containers (the Docker daemon down, the
  # socket not the user's) prints engine_error=OUTPUT, which the plan turns
  # into an error naming the fix: the reload's step would fail on it.
  if command -v "$cli" >/dev/null 2>&1; then
    if dr_out=$(eval "$serving" 2>&1); then
      printf '%s\n' "$dr_out"
    else
      printf 'engine_error=%s\n' "$(printf '%s' "$dr_out" | tr '\n' ' ')"
    fi
  fi

  # Which of the reloads fleet may run the node's sudo allows without a
  # password (`sudo -n -l`: it asks nothing, runs nothing): the unload, and a
  # load with each value of modeset and fbdev (an unlock's, or a restore's to
  # what the node had): the commands the plan's sudoers advice allows.
  dr_mp=$(command -v modprobe 2>/dev/null) || dr_mp=/usr/sbin/modprobe
  echo "sudo_checked=1"
  echo "modprobe_path=$dr_mp"
  echo "sudo_user=$(id -un)"
  sudo -n -l "$dr_mp" -r "$module" >/dev/null 2>&1 && echo "sudo_ok=-r $module"
  for ms in 1 0; do
    for fb in 0 1; do
      sudo -n -l "$dr_mp" "$module" "modeset=$ms" "fbdev=$fb" >/dev/null 2>&1 &&
        echo "sudo_ok=$module modeset=$ms fbdev=$fb"
    done
  done

  # What holds the DRM device open (a display manager's X or Wayland session:
  # `modprobe -r` fails under it). One find over /proc/*/fd (the descriptors
  # the SSH user may read); the unit from `systemctl status PID`'s first line.
  # A display manager running as root or its own user (gdm's greeter) is not
  # readable: where none was seen, card0 exists and display-manager.service is
  # active, that unit is named. For each unit: whether sudo allows
  # `systemctl stop` and `start` of it (display_manager: stop).
  dr_sc=$(command -v systemctl 2>/dev/null) || dr_sc=/usr/bin/systemctl
  printf 'drm_systemctl=%s\n' "$dr_sc"
  dr_unit() {
    printf 'drm_unit=%s\n' "$1"
    sudo -n -l "$dr_sc" stop "$1" >/dev/null 2>&1 &&
      sudo -n -l "$dr_sc" start "$1" >/dev/null 2>&1 &&
      printf 'drm_unit_sudo_ok=%s\n' "$1"
  }
  dr_seen=
  for dr_h in $(find /proc/[0-9]*/fd -lname "$dev/dri/card*" 2>/dev/null | cut -d/ -f3 | sort -u); do
    dr_seen=1
    dr_c=
    { read -r dr_c </proc/"$dr_h"/comm; } 2>/dev/null
    dr_u=$(systemctl status --no-pager "$dr_h" 2>/dev/null |
      sed -n '1s/^[^[:alnum:]]*\([^ ]*\).*/\1/p')
    printf 'drm_holder=%s (pid %s, unit %s)\n' "$dr_c" "$dr_h" "${dr_u:-none}"
    [ -z "$dr_u" ] || dr_unit "$dr_u"
  done
  # Before an unlock there may be no card0 to hold (modeset=N): an active
  # display manager then takes the one the unlock makes, with the display
  # memory the unlock frees, and the restore's `modprobe -r` fails under it.
  if [ -z "$dr_seen" ] && { [ -e "$dev/dri/card0" ] || [ "$want" = unlocked ]; } &&
    systemctl --quiet is-active display-manager.service 2>/dev/null; then
    dr_u=$(systemctl show -p Id --value display-manager.service 2>/dev/null)
    if [ -e "$dev/dri/card0" ]; then
      printf 'drm_holder=the display manager (unit %s, active; its processes are not readable by %s)\n' \
        "${dr_u:=display-manager.service}" "$(id -un)"
    else
      printf 'drm_holder=the display manager (unit %s, active)\n' "${dr_u:=display-manager.service}"
    fi
    dr_unit "$dr_u"
  fi
fi
