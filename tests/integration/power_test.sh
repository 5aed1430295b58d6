#!/usr/bin/env bash
# Power through a Home Assistant switch: destroy powers nodes off (sshd gone)
# after restoring display RAM; apply powers them on and converges; a down or
# refusing controller is a clear error that changes nothing; the token never
# shows up in output, plan files or state.
source "$(dirname "$0")/lib.sh"

start_fleet 3 --power
FLEET_SIM_HA_TOKEN=$(cat "$SIMDIR/ha_token")
export FLEET_SIM_HA_TOKEN
token=$FLEET_SIM_HA_TOKEN
mkrepo --power --unlock dgx1 --power-off dgx3

step "apply: unlock dgx1, power the declared-off spare dgx3 down"
expect_rc 0 apply --auto-approve
[[ $("$SIM" node-status "$SIMDIR" dgx3) == off ]] || fail "dgx3 still on"
[[ $(param dgx1 modeset) == Y ]] || fail "dgx1 not unlocked"
assert_converged

step "destroy: restore display RAM, then power off, in that order; a failed restore never skips the power off"
# dgx1's modprobe fails: its restore cannot run, and the shift-end power
# off must go on (the reboot brings nvidia_drm back to its boot default;
# display_ram_test holds the restore itself).
echo "modprobe: FATAL: Module nvidia_drm is in use." >"$(node_root dgx1)/sim/fail-modprobe"
expect_rc 2 plan --destroy --detailed-exitcode
expect_out "restore display RAM"
expect_out "if the restore fails, the power off still runs"
expect_rc 0 destroy --auto-approve
expect_out "Destroy complete"
expect_out "restore failed"
rm -f "$(node_root dgx1)/sim/fail-modprobe"
for n in dgx1 dgx2 dgx3; do
  [[ $("$SIM" node-status "$SIMDIR" "$n") == off ]] || fail "$n still on after destroy"
done
# dgx1's module is moot while it is off; the power on boots it at its
# default (fleet-sim's node-start), and apply unlocks it again below.
restore_line=$(grep -n "display_ram.dgx1: complete" "$WORK/out" | cut -d: -f1)
off_line=$(grep -n "node.dgx1: Modifying" "$WORK/out" | cut -d: -f1)
((restore_line < off_line)) || fail "dgx1 powered off before its display RAM was restored"

step "after destroy, plan shows what apply brings back"
expect_rc 2 plan --detailed-exitcode
expect_out "power on"
expect_rc 0 plan -out "$WORK/plan.json"

step "apply powers on and converges"
expect_rc 0 apply --auto-approve
for n in dgx1 dgx2; do
  [[ $("$SIM" node-status "$SIMDIR" "$n") == on ]] || fail "$n not powered on"
done
[[ $("$SIM" node-status "$SIMDIR" dgx3) == off ]] || fail "the spare came on"
[[ $(param dgx1 modeset) == Y ]] || fail "dgx1 not unlocked after power on"
assert_converged

step "a node whose host key changed is never switched off under its OS"
# A saved plan powers dgx2 off; its key changes before the apply. It answers,
# so its OS runs: fleet, unable to shut it down, must leave the switch on
# (it once read any failed connection as "already down" and switched it off).
mkrepo --power --unlock dgx1 --power-off dgx3,dgx2
expect_rc 0 plan -out "$WORK/off.json"
expect_out "power off"
"$SIM" rekey "$SIMDIR" dgx2 >/dev/null
expect_rc 1 apply --auto-approve "$WORK/off.json"
expect_out "host key has CHANGED"
expect_out "not switching power off"
[[ $("$SIM" node-status "$SIMDIR" dgx2) == on ]] || fail "dgx2 was switched off under its OS"
kh=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["known_hosts"])' "$SIMDIR/sim.json")
entry="[$(node_field dgx2 address)]:$(node_field dgx2 port)"
grep -vF "$entry " "$kh" >"$WORK/kh" || true
echo "$entry $(cut -d' ' -f1-2 "$SIMDIR/nodes/dgx2/sshd/ssh_host_ed25519_key.pub")" >>"$WORK/kh"
cat "$WORK/kh" >"$kh"  # the operator's fix: the node's new key, checked out of band
mkrepo --power --unlock dgx1 --power-off dgx3
assert_converged

step "power off gives the OS power.halt_wait to halt after SSH stops"
# fleet-sim's OS halts /srv/sim/halt-ms (1000) after its poweroff, its SSH
# gone at 0.3 s, and the power server records a switch turned off before the
# halt ended (nodes/NAME/cuts-while-halting). Every power off above waited
# mkrepo's halt_wait: 2s.
cuts() { cat "$SIMDIR/nodes/$1/cuts-while-halting" 2>/dev/null; }
for n in dgx1 dgx2 dgx3; do [[ -z $(cuts $n) ]] || fail "$n was cut while halting: $(cuts $n)"; done
# dgx2 now takes 4 s to halt: halt_wait 0s cuts it mid-halt (the control:
# the check above can fail), halt_wait 5s does not.
echo 4000 >"$(node_root dgx2)/sim/halt-ms"
for wait in 0s 5s; do
  mkrepo --power --unlock dgx1 --power-off dgx3,dgx2
  sed -i "s/switch.dgx2, state: off, halt_wait: 2s/switch.dgx2, state: off, halt_wait: $wait/" \
    "$REPO/fleet.yaml"
  expect_rc 0 apply --auto-approve
  [[ $("$SIM" node-status "$SIMDIR" dgx2) == off ]] || fail "dgx2 still on (halt_wait $wait)"
  if [[ $wait == 0s ]]; then
    expect_no_out "power.halt_wait"  # the manifest's 0s took effect
    [[ -n $(cuts dgx2) ]] || fail "halt_wait 0s: no cut seen during dgx2's 4 s halt"
    rm -f "$SIMDIR/nodes/dgx2/cuts-while-halting"
  else
    expect_out "waiting 5 s (power.halt_wait) for the OS to halt"
    [[ -z $(cuts dgx2) ]] || fail "halt_wait 5s: dgx2 was cut while halting: $(cuts dgx2)"
  fi
  mkrepo --power --unlock dgx1 --power-off dgx3
  expect_rc 0 apply --auto-approve
done
rm -f "$(node_root dgx2)/sim/halt-ms"
assert_converged

step "the plan reads every switch: a mistyped or unavailable entity is a plan error"
# The log's config.toml had the wrong entity on a node. A mistyped one is
# found by the plan (HA answers 404), not after power on waited out
# boot_timeout; so is one HA reads "unavailable".
serial=$(state_serial)
sed -i 's/switch: switch.dgx2,/switch: switch.dgx2x,/' "$REPO/fleet.yaml"
ms() { echo $((${EPOCHREALTIME/./} / 1000)); }
t0=$(ms)
expect_rc 1 plan
took=$(($(ms) - t0))
expect_out "node dgx2: cannot read its power switch switch.dgx2x"
expect_out "no such entity"
((took < 10000)) || fail "the plan took $took ms"
echo "the mistyped entity failed the plan in $took ms"
mkrepo --power --unlock dgx1 --power-off dgx3
"$SIM" switch "$SIMDIR" dgx3 unavailable
expect_rc 1 plan --destroy
expect_out "node dgx3: its power switch switch.dgx3 is unusable"
expect_out "'unavailable'"
"$SIM" switch "$SIMDIR" dgx3 ok
[[ $(state_serial) == "$serial" ]] || fail "a failed plan changed the state"
assert_converged

step "a switch that stays on after turn_off fails the power off at once, with its state"
"$SIM" switch "$SIMDIR" dgx2 stuck
mkrepo --power --unlock dgx1 --power-off dgx3,dgx2
t0=$(ms)
expect_rc 1 apply --auto-approve
took=$(($(ms) - t0))
expect_out "switch switch.dgx2 did not follow turn_off: it still reads on"
# halt_wait (2 s) + the read-back bound (5 s) + the shutdown: not boot or
# shutdown timeouts.
((took < 20000)) || fail "the stuck switch took $took ms to fail"
echo "the stuck switch failed the step in $took ms"
"$SIM" switch "$SIMDIR" dgx2 ok  # the relay opens: the halted node is off
mkrepo --power --unlock dgx1 --power-off dgx3
expect_rc 0 apply --auto-approve
[[ $("$SIM" node-status "$SIMDIR" dgx2) == on ]] || fail "dgx2 not back on"
assert_converged

step "an https controller: power.ca_file verifies it; without one the system's CAs refuse a private CA; insecure: true is explicit"
tls=$WORK/tls
mkdir -p "$tls" "$REPO/certs"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 1 \
  -subj /CN=fleet-test-ca -keyout "$tls/ca.key" -out "$REPO/certs/ha-ca.pem" 2>/dev/null
openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj /CN=127.0.0.1 \
  -keyout "$tls/ha.key" -out "$tls/ha.csr" 2>/dev/null
openssl x509 -req -in "$tls/ha.csr" -CA "$REPO/certs/ha-ca.pem" -CAkey "$tls/ca.key" \
  -CAcreateserial -days 1 -extfile <(printf 'subjectAltName=IP:127.0.0.1\n') \
  -out "$tls/ha.pem" 2>/dev/null || fail "openssl could not sign the controller's certificate"
rm -f "$SIMDIR/ha_tls.port"
python3 "$ROOT/tests/sim/ha_switch_server.py" --dir "$SIMDIR" --sim "$SIM" \
  --tls-cert "$tls/ha.pem" --tls-key "$tls/ha.key" 2>>"$WORK/ha_tls.err" &
BG_PIDS+=($!)
for _ in $(seq 50); do [[ -s $SIMDIR/ha_tls.port ]] && break; sleep 0.1; done
[[ -s $SIMDIR/ha_tls.port ]] || fail "the https stand-in did not start: $(cat "$WORK/ha_tls.err")"
https_url="https://127.0.0.1:$(cat "$SIMDIR/ha_tls.port")"
tls_repo() {  # tls_repo EXTRA: the manifests with the https controller and EXTRA keys
  mkrepo --power --ha-url "$https_url" --unlock dgx1 --power-off dgx3
  sed -i "s|, token_env: |$1, token_env: |" "$REPO/fleet.yaml"
  grep -qF "$https_url\"$1, token_env" "$REPO/fleet.yaml" || fail "no https controller in fleet.yaml"
}
tls_repo ", ca_file: certs/ha-ca.pem"
expect_rc 0 plan --detailed-exitcode  # every switch read over TLS, checked against the CA
tls_repo ""
expect_rc 1 plan
expect_out "checked against the system's CAs: name the CA that signed the controller's certificate with power.ca_file"
tls_repo ", insecure: true"
expect_rc 0 plan --detailed-exitcode
tls_repo ", ca_file: certs/ha-ca.pem, insecure: true"
expect_rc 1 validate
expect_out "both 'ca_file' and 'insecure: true'"
kill "$(cat "$SIMDIR/ha_tls.pid")"
mkrepo --power --unlock dgx1 --power-off dgx3

step "a controller that answers 401: clear error, nothing changed"
"$SIM" node-stop "$SIMDIR" dgx2 >/dev/null
serial=$(state_serial)
touch "$SIMDIR/ha_fail_401"
expect_rc 1 apply --auto-approve
expect_out "401"
expect_out "token"
[[ $(state_serial) == "$serial" ]] || fail "state changed on a 401"
[[ $("$SIM" node-status "$SIMDIR" dgx2) == off ]] || fail "dgx2 changed"
rm -f "$SIMDIR/ha_fail_401"

step "a controller that is down: clear error, nothing changed"
ha_pid=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["ha"]["pid"])' "$SIMDIR/sim.json")
kill "$ha_pid"
sleep 0.3
expect_rc 1 apply --auto-approve
expect_out "power controller http://127.0.0.1"
[[ $(state_serial) == "$serial" ]] || fail "state changed with the controller down"
[[ $("$SIM" node-status "$SIMDIR" dgx2) == off ]] || fail "dgx2 changed"

step "the token never appears in output, plan files or state"
for f in "$WORK/transcript" "$WORK/plan.json" "$(state_file)" "$(state_file).backup" "$REPO/fleet.yaml"; do
  [[ -e $f ]] || continue
  ! grep -qF "$token" "$f" || fail "token leaked into $f"
done

step "two nodes naming the same switch entity is a validate error naming both"
sed -i 's/switch: switch.dgx2/switch: switch.dgx1/' "$REPO/fleet.yaml"
expect_rc 1 validate
expect_out "dgx1"
expect_out "dgx2"
expect_out "switch.dgx1"
echo PASS
