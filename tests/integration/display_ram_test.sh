#!/usr/bin/env bash
# Display RAM unlock and restore from both starting states; a half-done
# unlock is rolled back by the step itself; a reboot is seen at plan time.
# On docker nodes (display_ram_docker_test) only the first two: an unlock and
# its restore on nodes whose probe lists docker's containers; the half-done
# unlock and the reboot are the node's module and boot id, not the engine
# (engine_free_phase in lib.sh).
source "$(dirname "$0")/lib.sh"

start_fleet 2
drm() { echo "$(node_root "$1")/sys/module/nvidia_drm/parameters"; }

step "two starting states: dgx1 at the DGX default (N/Y), dgx2 at modeset=Y fbdev=Y"
echo Y >"$(drm dgx2)/modeset"
mkrepo --unlock dgx1,dgx2
expect_rc 0 apply --auto-approve
for n in dgx1 dgx2; do
  [[ $(param $n modeset) == Y && $(param $n fbdev) == N ]] || fail "$n not unlocked"
done
assert_converged
expect_rc 0 status
expect_out "unlocked (gain not measured)"  # no GPU here: measured, never guessed
expect_rc 0 state show display_ram.dgx1
expect_out '"gpu_free_before_bytes": null'

step "a display manager holds dgx1's DRM device: the restore's plan names it and the fix"
# The stand-in gdm (fleet-sim: a process of unit gdm holding card0) makes
# `modprobe -r nvidia_drm` fail; the plan says so before anything runs.
on_node dgx1 'setsid -f /srv/bin/gdm </dev/null >/dev/null 2>&1'
for _ in $(seq 50); do [[ -s "$(node_root dgx1)/sim/units/gdm.pid" ]] && break; sleep 0.1; done
[[ -s "$(node_root dgx1)/sim/units/gdm.pid" ]] || fail "the stand-in gdm did not start"
mkrepo --unlock dgx2
expect_rc 1 plan
expect_out "display_ram.dgx1: /srv/dev/dri/card* is held open by gdm (pid $(cat "$(node_root dgx1)/sim/units/gdm.pid"), unit gdm.service)"
expect_out "Stop it first (\`sudo systemctl stop gdm.service\`"
[[ $(param dgx1 modeset) == Y ]] || fail "the plan changed the module"

step "display_manager: stop: fleet stops gdm for the reload and starts it after the restore"
sed -i '/^  dgx1:$/a\    display_manager: stop' "$REPO/fleet.yaml"
expect_rc 1 plan  # the drop-in lacks systemctl stop/start gdm.service
expect_out "for a password to stop and start the display manager"
grep -oh '[^ ]* ALL=(root) NOPASSWD: /srv/bin/systemctl stop gdm.service, /srv/bin/systemctl start gdm.service$' \
  "$WORK/out" "$WORK/err" | head -n 1 >>"$(node_root dgx1)/etc/sudoers.d/fleet"
grep -q "systemctl start gdm.service" "$(node_root dgx1)/etc/sudoers.d/fleet" || fail "no systemctl line printed"
expect_rc 2 plan --detailed-exitcode
expect_out "stops gdm.service (display_manager: stop"
expect_rc 0 apply --auto-approve
[[ $(param dgx1 modeset) == N && $(param dgx1 fbdev) == Y ]] || fail "dgx1 not restored"
[[ $(on_node dgx1 'systemctl is-active gdm') == active ]] || fail "gdm not started again"
assert_converged
on_node dgx1 'systemctl stop gdm'  # gdm would take card0 at the next unlock
mkrepo --unlock dgx1,dgx2  # the manifests the steps below start from

step "destroy returns each node to the values recorded before its unlock"
expect_rc 0 destroy --auto-approve
[[ $(param dgx1 modeset) == N && $(param dgx1 fbdev) == Y ]] || fail "dgx1 not back to N/Y"
[[ $(param dgx2 modeset) == Y && $(param dgx2 fbdev) == Y ]] || fail "dgx2 not back to Y/Y"
expect_rc 0 state list
expect_no_out "display_ram"

if engine_free_phase; then
step "the unlock direction: gdm runs (no card0 yet); the plan names it, display_manager: stop unlocks"
on_node dgx1 'setsid -f /srv/bin/gdm </dev/null >/dev/null 2>&1'
for _ in $(seq 50); do [[ -s "$(node_root dgx1)/sim/units/gdm.pid" ]] && break; sleep 0.1; done
[[ $(on_node dgx1 'systemctl is-active gdm') == active ]] || fail "the stand-in gdm did not start"
mkrepo --unlock dgx1
expect_rc 1 plan
expect_out "display_ram.dgx1: the display manager (unit gdm.service, active) would open the /srv/dev/dri/card0 the unlock makes"
expect_out "or declare \`display_manager: stop\` on the node"
sed -i '/^  dgx1:$/a\    display_manager: stop' "$REPO/fleet.yaml"
expect_rc 2 plan --detailed-exitcode
expect_out "stops gdm.service (display_manager: stop"
expect_rc 0 apply --auto-approve
[[ $(param dgx1 modeset) == Y && $(param dgx1 fbdev) == N ]] || fail "dgx1 not unlocked"
# Stopped while unlocked: it would take the new card0 and the memory freed.
[[ $(on_node dgx1 'systemctl is-active gdm') == inactive ]] || fail "gdm runs beside the unlock"
assert_converged
expect_rc 0 destroy --auto-approve  # the restore starts it again
[[ $(param dgx1 modeset) == N && $(param dgx1 fbdev) == Y ]] || fail "dgx1 not back to N/Y"
[[ $(on_node dgx1 'systemctl is-active gdm') == active ]] || fail "gdm not started again after the restore"
on_node dgx1 'systemctl stop gdm'
mkrepo --unlock dgx1,dgx2

step "a half-done unlock (unload ok, load fails) restores the module and says so"
touch "$(node_root dgx1)/sim/fail-modprobe-unlock"
chmod 666 "$(node_root dgx1)/sim/fail-modprobe-unlock"
expect_rc 1 apply --auto-approve
expect_out "display_ram.dgx1"
expect_out "restored"
[[ $(param dgx1 modeset) == N && $(param dgx1 fbdev) == Y ]] || fail "dgx1 left half done"
[[ $(param dgx2 modeset) == Y && $(param dgx2 fbdev) == N ]] || fail "independent dgx2 did not go on"
rm -f "$(node_root dgx1)/sim/fail-modprobe-unlock"
expect_rc 0 apply --auto-approve
assert_converged

step "a reboot brings the module back to its boot default: plan says so"
"$SIM" node-stop "$SIMDIR" dgx1 >/dev/null
"$SIM" node-start "$SIMDIR" dgx1 >/dev/null
echo N >"$(drm dgx1)/modeset"
echo Y >"$(drm dgx1)/fbdev"
expect_rc 2 plan --detailed-exitcode
expect_out "rebooted"
expect_rc 0 apply --auto-approve
assert_converged
fi
echo PASS
