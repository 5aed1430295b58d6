#!/usr/bin/env bash
# A node whose sudo asks for a password (Ubuntu's, DGX OS's, for a user
# without a NOPASSWD rule): fleet runs its reloads with `sudo -n`, which
# cannot answer one.
# - `fleet plan` of a display RAM unlock fails on that node, naming the
#   commands and the exact drop-in to install (nothing broader), before
#   anything runs;
# - with the drop-in fleet printed, unlock and restore work;
# - a plan that powers the node off (a destroy's) fails the same way for the
#   poweroff command, naming the line to add, and passes with it.
source "$(dirname "$0")/lib.sh"

step "1 node whose sudo asks for a password"
start_fleet 1 --power
FLEET_SIM_HA_TOKEN=$(cat "$SIMDIR/ha_token")
export FLEET_SIM_HA_TOKEN
dropin="$(node_root dgx1)/etc/sudoers.d/fleet"
rm -f "$dropin"
on_node dgx1 'sudo -n modprobe -r nvidia_drm' 2>"$WORK/sudo.err" && fail "the sim's sudo did not ask"
grep -q "a password is required" "$WORK/sudo.err" || fail "the sim's sudo said: $(cat "$WORK/sudo.err")"
mkrepo --unlock dgx1

step "plan: an error naming the node, the commands and the drop-in"
expect_rc 1 plan
expect_out "display_ram.dgx1: sudo on dgx1 asks"
expect_out "for a password for \`sudo -n /srv/bin/modprobe -r nvidia_drm\`"
expect_out "NOPASSWD: /srv/bin/modprobe -r nvidia_drm, /srv/bin/modprobe nvidia_drm modeset=1 fbdev=0, /srv/bin/modprobe nvidia_drm modeset=0 fbdev=1"
[[ $(param dgx1 modeset) == N ]] || fail "the plan changed the module"
! grep -q nvidia_drm "$(node_root dgx1)/sim/modprobe.log" 2>/dev/null ||
  fail "modprobe of nvidia_drm ran: $(cat "$(node_root dgx1)/sim/modprobe.log")"

step "the drop-in fleet printed installed: unlock, then restore"
grep -oh '[^ ]* ALL=(root) NOPASSWD: .*' "$WORK/out" "$WORK/err" | head -n 1 >"$dropin"
grep -q NOPASSWD "$dropin" || fail "no drop-in line in the plan's error"
expect_rc 2 plan --detailed-exitcode
expect_rc 0 apply --auto-approve
[[ $(param dgx1 modeset) == Y && $(param dgx1 fbdev) == N ]] || fail "dgx1 not unlocked"
assert_converged
mkrepo
expect_rc 0 apply --auto-approve
[[ $(param dgx1 modeset) == N && $(param dgx1 fbdev) == Y ]] || fail "dgx1 not restored"
assert_converged

step "power off: the plan asks sudo about the poweroff command too"
# The drop-in holds the reloads only: a destroy's power off would fail
# after the serves stopped. The plan says so, with the line to add.
mkrepo --power
expect_rc 0 plan  # keeps dgx1 on: nothing to ask
expect_rc 1 plan --destroy
expect_out "node dgx1: sudo on dgx1 asks"
expect_out "for a password for \`sudo -n /srv/bin/systemctl poweroff\`"
line=$(grep -oh '[^ ]* ALL=(root) NOPASSWD: /srv/bin/systemctl poweroff$' "$WORK/out" "$WORK/err" | head -n 1)
[[ -n $line ]] || fail "no poweroff line in the plan's error"
[[ $("$SIM" node-status "$SIMDIR" dgx1) == on ]] || fail "the plan powered dgx1 off"
echo "$line" >>"$dropin"
expect_rc 2 plan --destroy --detailed-exitcode
expect_out "power off"
no_crash
echo "PASS sudo_test"
