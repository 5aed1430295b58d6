#!/usr/bin/env bash
# Self-test of tests/sim/fleet-sim: starts 3 simulated nodes with a power
# switch server, checks them with plain OpenSSH and HTTP, switches them off and
# on, stops them and checks that nothing is left behind; --disk and disk-fill.
# Exit 0: all passed; 1: a check failed; 77: skipped (not root / no sshd).
# Safe to run concurrently with other sims (own DIR, random users, free ports).
set -euo pipefail

HERE=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
SIM="$HERE/fleet-sim"

. "$HERE/selftest_lib.sh"
selftest_require /usr/sbin/sshd ssh python3 unshare

check() { # check DESCRIPTION COMMAND...
	local what=$1 out
	shift
	if out=$("$@" 2>&1); then ok "$what"; else not_ok "$what" "$(printf '%s' "$out" | tail -n 5 | tr '\n' ' ')"; fi
}
check_ne() {
	if [[ $2 != "$3" ]]; then ok "$1"; else not_ok "$1" "both '$2'"; fi
}
check_if() { # check_if DESCRIPTION DETAIL TEST...: TEST is a [[ ]]-free command
	local what=$1 detail=$2
	shift 2
	if "$@"; then ok "$what"; else not_ok "$what" "$detail"; fi
}
words() { # one line, words separated by single spaces
	local -a w
	read -r -d '' -a w <<<"$1" || true
	printf '%s' "${w[*]}"
}
matches() { [[ $1 =~ $2 ]]; }
# shellcheck disable=SC2053 # $2 is a glob pattern
globs() { [[ $1 == $2 ]]; }

DIR=$(mktemp -d /tmp/fleet-sim-test.XXXXXX)
GPU_DIR=$DIR.gpu
DOCKER_DIR=$DIR.docker
DISK_DIR=$DIR.disk
EXEC_DIR=$DIR.exec
cleanup() {
	local rc=$?
	"$SIM" stop "$DIR" --purge >/dev/null 2>&1 || true
	"$SIM" stop "$GPU_DIR" --purge >/dev/null 2>&1 || true
	"$SIM" stop "$DOCKER_DIR" --purge >/dev/null 2>&1 || true
	"$SIM" stop "$DISK_DIR" --purge >/dev/null 2>&1 || true
	"$SIM" stop "$EXEC_DIR" --purge >/dev/null 2>&1 || true
	rm -rf -- "$DIR" "$GPU_DIR" "$DOCKER_DIR" "$DISK_DIR" "$EXEC_DIR"
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

T0=${EPOCHREALTIME/./}
if ! "$SIM" start "$DIR" --nodes 3 --power; then
	not_ok "fleet-sim start --nodes 3 --power"
	echo "$PASS passed, $FAIL failed"
	exit 1
fi
ok "fleet-sim start --nodes 3 --power ($(((${EPOCHREALTIME/./} - T0) / 1000)) ms)"

# sim.json -> shell arrays
declare -a NAMES=() PORTS=() USERS=() ROOTS=()
while read -r n p u r; do
	NAMES+=("$n")
	PORTS+=("$p")
	USERS+=("$u")
	ROOTS+=("$r")
done < <(python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
for n in d["nodes"]:
    print(n["name"], n["port"], n["user"], n["root"])
' "$DIR/sim.json")
HA_URL=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["ha"]["url"])' "$DIR/sim.json")
TOKEN=$(<"$DIR/ha_token")
check_eq "sim.json lists 3 nodes" "dgx1 dgx2 dgx3" "${NAMES[*]}"

ssh_node() { # ssh_node INDEX COMMAND: plain OpenSSH, strict host key checking
	ssh -o StrictHostKeyChecking=yes -o UserKnownHostsFile="$DIR/known_hosts" \
		-o BatchMode=yes -o ConnectTimeout=5 -o LogLevel=ERROR \
		-i "$DIR/id_ed25519" -p "${PORTS[$1]}" "${USERS[$1]}@127.0.0.1" "$2"
}

# ha METHOD PATH [BODY] [TOKEN]: prints "CODE BODY"
ha() {
	python3 - "$HA_URL" "$1" "$2" "${3-}" "${4-$TOKEN}" <<'PY'
import sys, urllib.request, urllib.error
url, method, path, body, token = sys.argv[1:6]
req = urllib.request.Request(url + path, method=method, data=body.encode() if body else None)
if token:
    req.add_header("Authorization", "Bearer " + token)
req.add_header("Content-Type", "application/json")
try:
    with urllib.request.urlopen(req, timeout=60) as r:
        print(r.status, r.read().decode())
except urllib.error.HTTPError as e:
    print(e.code, e.read().decode())
PY
}

ha_state() { # the switch state as HA reports it
	ha GET "/api/states/switch.$1" | python3 -c 'import json, sys; print(json.loads(sys.stdin.read().split(" ", 1)[1])["state"])'
}

# ---------------------------------------------------------------- the files
check "fleet.yaml names every node" grep -q "ssh: {user: ${USERS[2]}, port: ${PORTS[2]}}" "$DIR/fleet.yaml"
check "fleet.yaml has the power block" grep -q "power: {kind: home-assistant, url: \"$HA_URL\", token_env: FLEET_SIM_HA_TOKEN}" "$DIR/fleet.yaml"
if grep -qF -- "$TOKEN" "$DIR/fleet.yaml" "$DIR/sim.json"; then
	not_ok "the HA token is in neither fleet.yaml nor sim.json"
else
	ok "the HA token is in neither fleet.yaml nor sim.json"
fi
check_eq "ha_token is mode 0600" 600 "$(stat -c %a "$DIR/ha_token")"
check "known_hosts has [127.0.0.1]:PORT lines" grep -q "^\[127.0.0.1\]:${PORTS[0]} ssh-ed25519 AAAA" "$DIR/known_hosts"

# ---------------------------------------------------------------- the nodes
HOST_BOOT_ID=$(</proc/sys/kernel/random/boot_id)
HOST_MACHINE_ID=$(</etc/machine-id)
declare -A BOOT_IDS=() MACHINE_IDS=()
for i in 0 1 2; do
	n=${NAMES[i]}
	printf 'host side %s\n' "$n" >"${ROOTS[i]}/hf/hub/from-host"
	# shellcheck disable=SC2016 # expanded on the node
	out=$(ssh_node "$i" 'hostname; cat /proc/sys/kernel/random/boot_id /etc/machine-id /srv/hf/hub/from-host; echo "$PATH"; id -un' 2>&1) || true
	mapfile -t lines <<<"$out"
	check_eq "$n: hostname over ssh" "$n" "${lines[0]-}"
	check_ne "$n: own boot id" "$HOST_BOOT_ID" "${lines[1]-}"
	check_ne "$n: own machine id" "$HOST_MACHINE_ID" "${lines[2]-}"
	check_eq "$n: /srv is its node root" "host side $n" "${lines[3]-}"
	check_eq "$n: PATH starts with /srv/bin" "/srv/bin:/usr/local/bin:/usr/bin:/bin" "${lines[4]-}"
	check_eq "$n: logged in as the node user" "${USERS[i]}" "${lines[5]-}"
	BOOT_IDS[${lines[1]-x$i}]=1
	MACHINE_IDS[${lines[2]-x$i}]=1
done
check_eq "boot ids differ per node" 3 "${#BOOT_IDS[@]}"
check_eq "machine ids differ per node" 3 "${#MACHINE_IDS[@]}"

out=$(ssh_node 1 'touch /srv/hf/hub/from-node && echo done' 2>&1) || true
check_eq "dgx2: the node user writes its HF cache" "done" "$out"
check "dgx2: ... which lands in its node root" test -f "${ROOTS[1]}/hf/hub/from-node"
check "dgx1: ... and not in another node's" test ! -e "${ROOTS[0]}/hf/hub/from-node"

# ---------------------------------------------------------------- the stand-ins
# shellcheck disable=SC2016 # expanded on the node
out=$(ssh_node 0 'for c in nvidia-smi modprobe sudo systemctl; do command -v "$c"; done' 2>&1) || true
check_eq "stand-ins come first on PATH" "/srv/bin/nvidia-smi /srv/bin/modprobe /srv/bin/sudo /srv/bin/systemctl" "$(words "$out")"
out=$(ssh_node 0 'nvidia-smi --query-gpu=name,uuid,memory.total,memory.free,driver_version --format=csv,noheader' 2>&1) || true
check_if "nvidia-smi --query-gpu mimics a GB10" "$out" \
	matches "$out" '^NVIDIA GB10, GPU-[0-9a-f-]{36}, \[N/A\], \[N/A\], 580\.95\.05$'
uuid0=$(ssh_node 0 'nvidia-smi -L' 2>&1) || true
uuid1=$(ssh_node 1 'nvidia-smi -L' 2>&1) || true
check_if "nvidia-smi -L" "$uuid0" matches "$uuid0" '^GPU 0: NVIDIA GB10 \(UUID: GPU-[0-9a-f-]{36}\)$'
check_ne "GPU uuids differ per node" "$uuid0" "$uuid1"

drm='cat /srv/sys/module/nvidia_drm/parameters/modeset /srv/sys/module/nvidia_drm/parameters/fbdev; test -e /srv/dev/dri/card0 && echo card0 || echo no-card0'
out=$(ssh_node 0 "$drm" 2>&1) || true
check_eq "display RAM default: modeset=N fbdev=Y, no card0" "N Y no-card0" "$(words "$out")"
out=$(ssh_node 0 "sudo -n modprobe nvidia_drm modeset=1 fbdev=0 && $drm" 2>&1) || true
check_eq "modprobe while loaded changes nothing" "N Y no-card0" "$(words "$out")"
out=$(ssh_node 0 "sudo -n modprobe -r nvidia_drm && test ! -d /srv/sys/module/nvidia_drm/parameters && sudo -n modprobe nvidia_drm modeset=1 fbdev=0 && $drm" 2>&1) || true
check_eq "unload + load modeset=1 fbdev=0: Y N card0" "Y N card0" "$(words "$out")"
out=$(ssh_node 0 "sudo -n modprobe -r nvidia_drm && modprobe nvidia_drm && $drm" 2>&1) || true
check_eq "load without options restores the defaults" "N Y no-card0" "$(words "$out")"
touch "${ROOTS[0]}/sim/fail-modprobe"
out=$(ssh_node 0 'sudo -n modprobe -r nvidia_drm 2>&1; echo "rc=$?"' 2>&1) || true
check_if "/srv/sim/fail-modprobe makes modprobe fail" "$out" globs "$out" '*modprobe:*rc=1'
rm -f -- "${ROOTS[0]}/sim/fail-modprobe"
out=$(ssh_node 0 'sudo -n -u root id -un' 2>&1) || true
check_eq "sudo asks for a password for what no drop-in allows" "sudo: a password is required" "$out"
echo "${USERS[0]} ALL=(root) NOPASSWD: /usr/bin/id -un" >"${ROOTS[0]}/etc/sudoers.d/id"
out=$(ssh_node 0 'sudo -n -u root id -un' 2>&1) || true
rm -f -- "${ROOTS[0]}/etc/sudoers.d/id"
check_eq "sudo runs what a drop-in allows, as the node user (no privilege)" "${USERS[0]}" "$out"
out=$(ssh_node 0 'sudo -n -l modprobe -r nvidia_drm' 2>&1) || true
check_eq "sudo -l names an allowed command" "/srv/bin/modprobe -r nvidia_drm" "$out"

# ---------------------------------------------------------------- power
check_eq "HA: switch.dgx3 is on" on "$(ha_state dgx3)"
check_eq "HA: no token -> 401" 401 "$(ha GET /api/states/switch.dgx3 '' '' | cut -d' ' -f1)"
check_eq "HA: wrong token -> 401" 401 "$(ha GET /api/states/switch.dgx3 '' wrong | cut -d' ' -f1)"
check_eq "HA: unknown entity -> 404" 404 "$(ha GET /api/states/switch.dgx9 | cut -d' ' -f1)"
touch "$DIR/ha_fail_401"
check_eq "HA: DIR/ha_fail_401 -> 401" 401 "$(ha GET /api/states/switch.dgx3 | cut -d' ' -f1)"
rm -f -- "$DIR/ha_fail_401"

boot_before=$(ssh_node 2 'cat /proc/sys/kernel/random/boot_id' 2>&1) || true
out=$(ssh_node 2 "sudo -n modprobe -r nvidia_drm && sudo -n modprobe nvidia_drm modeset=1 fbdev=0 && $drm" 2>&1) || true
check_eq "dgx3 unlocked before its power cycle" "Y N card0" "$(words "$out")"
out=$(ha POST /api/services/switch/turn_off '{"entity_id": "switch.dgx3"}')
check_if "HA: turn_off answers the changed state" "$out" globs "$out" '200 \[*"state": "off"*'
check_eq "HA: switch.dgx3 is off" off "$(ha_state dgx3)"
check_eq "node-status dgx3: off" off "$("$SIM" node-status "$DIR" dgx3)"
if ssh_node 2 true >/dev/null 2>&1; then not_ok "a switched-off node is unreachable"; else ok "a switched-off node is unreachable"; fi
out=$(ha POST /api/services/switch/turn_on '{"entity_id": "switch.dgx3"}')
check_if "HA: turn_on answers the changed state" "$out" globs "$out" '200 \[*"state": "on"*'
boot_after=$(ssh_node 2 'cat /proc/sys/kernel/random/boot_id' 2>&1) || true
check_if "HA: turn_on boots the node" "before $boot_before after $boot_after" \
	matches "$boot_after" "^[0-9a-f-]{36}\$"
check_ne "... with a new boot id" "$boot_before" "$boot_after"
out=$(ssh_node 2 "$drm" 2>&1) || true
check_eq "... and nvidia_drm at its boot defaults (the last boot's unlock is gone)" "N Y no-card0" "$(words "$out")"
check_eq "HA: turn_on of an on switch changes nothing" "200 []" "$(ha POST /api/services/switch/turn_on '{"entity_id": "switch.dgx3"}')"

out=$(ssh_node 1 'systemctl poweroff; echo "rc=$?"' 2>&1) || true
check_eq "systemctl poweroff returns to the caller" rc=0 "$out"
state=on
for _ in $(seq 50); do
	state=$("$SIM" node-status "$DIR" dgx2)
	[[ $state == off ]] && break
	sleep 0.1
done
check_eq "systemctl poweroff switches the node off" off "$state"
check "node-start after a poweroff" "$SIM" node-start "$DIR" dgx2
check "... and the node answers again" ssh_node 1 true

# A node whose OS hangs in boot: the switch reads on, sshd never answers;
# turn_on meanwhile changes nothing; turn_off cuts the power and ends it.
"$SIM" boot-fault "$DIR" dgx3 hang
ha POST /api/services/switch/turn_off '{"entity_id": "switch.dgx3"}' >/dev/null
out=$(ha POST /api/services/switch/turn_on '{"entity_id": "switch.dgx3"}')
check_if "boot-fault hang: turn_on answers on" "$out" globs "$out" '200 \[*"state": "on"*'
check_eq "boot-fault hang: the switch reads on" on "$(ha_state dgx3)"
check_eq "boot-fault hang: node-status dgx3 off (no sshd)" off "$("$SIM" node-status "$DIR" dgx3)"
if ssh_node 2 true >/dev/null 2>&1; then not_ok "a hung node does not answer SSH"; else ok "a hung node does not answer SSH"; fi
check_eq "boot-fault hang: turn_on of the on relay changes nothing" "200 []" "$(ha POST /api/services/switch/turn_on '{"entity_id": "switch.dgx3"}')"
out=$(ha POST /api/services/switch/turn_off '{"entity_id": "switch.dgx3"}')
check_if "boot-fault hang: turn_off cuts the power" "$out" globs "$out" '200 \[*"state": "off"*'
"$SIM" boot-fault "$DIR" dgx3 ok
out=$(ha POST /api/services/switch/turn_on '{"entity_id": "switch.dgx3"}')
check_if "boot-fault ok: turn_on boots again" "$out" globs "$out" '200 \[*"state": "on"*'
check "... and dgx3 answers SSH" ssh_node 2 true

# ---------------------------------------------------------------- crash-silent
# a silent power loss: an open connection gets no FIN/RST (a read times out
# rather than ending), a new connect is not refused but unanswered; node-start
# brings the node back and lifts the drop.
exec {sock}<>"/dev/tcp/127.0.0.1/${PORTS[1]}"
read -r -t 5 -u "$sock" banner || true
check_if "dgx2 greets a raw TCP connection with an SSH banner" "$banner" globs "$banner" 'SSH-2.0-*'
ssh_node 1 'sudo -n modprobe -r nvidia_drm' >/dev/null 2>&1 || true
check "dgx2: nvidia_drm unloaded before the crash" test ! -e "${ROOTS[1]}/sys/module/nvidia_drm/parameters/modeset"
check "crash-silent dgx2" "$SIM" crash-silent "$DIR" dgx2
check_eq "crash-silent: dgx2's nvidia_drm is back at its boot defaults" "N Y" \
	"$(cat "${ROOTS[1]}/sys/module/nvidia_drm/parameters/modeset" "${ROOTS[1]}/sys/module/nvidia_drm/parameters/fbdev" 2>&1 | tr '\n' ' ' | sed 's/ $//')"
check_eq "crash-silent: dgx2 is off" off "$("$SIM" node-status "$DIR" dgx2)"
read -r -t 2 -u "$sock" _ && rc=0 || rc=$?
check_if "crash-silent: the open connection sees no end (read times out)" "read rc=$rc" test "$rc" -gt 128
exec {sock}>&-
timeout 2 bash -c "exec 3<>/dev/tcp/127.0.0.1/${PORTS[1]}" 2>/dev/null && rc=0 || rc=$?
check_eq "crash-silent: a new connect hangs (not refused)" 124 "$rc"
check "node-start after crash-silent" "$SIM" node-start "$DIR" dgx2
check "... and the node answers again" ssh_node 1 true
check "... with no drop table left" bash -c "! nft list tables | grep -q fleetsim_silent_${PORTS[1]}"

# ---------------------------------------------------------------- rekey
check "rekey dgx1" "$SIM" rekey "$DIR" dgx1
out=$(ssh_node 0 true 2>&1) && rc=0 || rc=$?
check_if "after rekey, strict host key checking refuses dgx1" "rc=$rc $out" \
	globs "rc=$rc $out" 'rc=255 *HOST IDENTIFICATION HAS CHANGED*'

# ---------------------------------------------------------------- stop
declare -a UIDS=()
for i in 0 1 2; do UIDS+=("$(id -u "${USERS[i]}")"); done
HA_PID=$(<"$DIR/ha.pid")
check "fleet-sim stop" "$SIM" stop "$DIR"
live=()
for u in "${UIDS[@]}"; do
	for pid in $(pgrep -u "$u" || true); do
		# a killed process waits for PID 1 to reap it: a zombie holds nothing
		[[ $(awk '/^State:/ { print $2 }' "/proc/$pid/status" 2>/dev/null) == Z ]] || live+=("$pid")
	done
done
check_eq "no process of a node user is left" "" "${live[*]}"
listening=0
for p in "${PORTS[@]}"; do
	ss -ltnH "sport = :$p" | grep -q . && listening=$((listening + 1))
done
check_eq "no node port is listening" 0 "$listening"
if [[ -e /proc/$HA_PID ]] && grep -q ha_switch_server "/proc/$HA_PID/cmdline" 2>/dev/null; then
	not_ok "the HA server is stopped"
else
	ok "the HA server is stopped"
fi
check "fleet-sim stop again (idempotent)" "$SIM" stop "$DIR"
check "fleet-sim stop --purge" "$SIM" stop "$DIR" --purge
gone=0
for u in "${USERS[@]}"; do getent passwd "$u" >/dev/null || gone=$((gone + 1)); done
check_eq "--purge deleted the node users" 3 "$gone"

# ---------------------------------------------------------------- simulated GPU
# The fake libcuda.so.1 / libnvidia-ml.so.1: FLEET_SIM_FAKE_GPU_DIR's (meson
# passes the build's), else compiled by fleet-sim.
if "$SIM" start "$DIR.bad" --nodes 1 --gpu a100 2>/dev/null; then
	not_ok "start --gpu a100 is refused"
	"$SIM" stop "$DIR.bad" --purge >/dev/null 2>&1
else
	ok "start --gpu a100 is refused"
fi
check "no sim left by the refused start" test ! -e "$DIR.bad"
if ! "$SIM" start "$GPU_DIR" --names spark,hopper,plain --gpu spark=gb10,hopper=h200 2>/dev/null; then
	not_ok "fleet-sim start --gpu spark=gb10,hopper=h200"
	echo "$PASS passed, $FAIL failed"
	exit 1
fi
ok "fleet-sim start --gpu spark=gb10,hopper=h200 (${FLEET_SIM_FAKE_GPU_DIR:-libraries compiled by fleet-sim})"
declare -a GPUS=()
while read -r n p u r g; do
	NAMES[${#GPUS[@]}]=$n PORTS[${#GPUS[@]}]=$p USERS[${#GPUS[@]}]=$u ROOTS[${#GPUS[@]}]=$r
	GPUS+=("$g")
done < <(python3 -c '
import json, sys
for n in json.load(open(sys.argv[1]))["nodes"]:
    print(n["name"], n["port"], n["user"], n["root"], n["gpu"])
' "$GPU_DIR/sim.json")
check_eq "sim.json: each node's GPU" "gb10 h200 none" "${GPUS[*]}"
# The next sim's users may be given the purged sim's uids (newusers reuses
# freed ones). Stopping the purged sim again must not touch them: its first
# node's recorded uid set to spark's, as such a reuse leaves it.
purged_env=$(ls "$DIR"/nodes/*/node.env | head -1)
sed -i "s/^uid=.*/uid=$(id -u "${USERS[0]}")/" "$purged_env"
check "fleet-sim stop of the purged sim again" "$SIM" stop "$DIR"
check_eq "a node given a purged node's uid is still on" on "$("$SIM" node-status "$GPU_DIR" spark 2>&1)"
DIR=$GPU_DIR # for ssh_node
# shellcheck disable=SC2016 # expanded on the node
for i in 0 1 2; do
	out=$(ssh_node "$i" 'echo "LD_LIBRARY_PATH=${LD_LIBRARY_PATH-}"; ls /srv/lib 2>/dev/null' 2>&1) || true
	if [[ ${GPUS[i]} == none ]]; then
		check_eq "${NAMES[i]}: no GPU, no fake driver" "LD_LIBRARY_PATH=" "$(words "$out")"
	else
		check_eq "${NAMES[i]}: exec channels find the fake driver (${GPUS[i]})" \
			"LD_LIBRARY_PATH=/srv/lib libcuda.so.1 libnvidia-ml.so.1" "$(words "$out")"
	fi
done
out=$(ssh_node 1 'nvidia-smi --query-gpu=memory.total,memory.free --format=csv' 2>&1) || true
check_eq "hopper: nvidia-smi reports the H200's memory in MiB" \
	"memory.total [MiB], memory.free [MiB]"$'\n'"143771 MiB, 143000 MiB" "$out"
out=$(ssh_node 1 'nvidia-smi --query-gpu=name,memory.total,memory.used,compute_cap --format=csv,noheader,nounits' 2>&1) || true
check_eq "hopper: nounits" "NVIDIA H200, 143771, 771, 9.0" "$out"
out=$(ssh_node 0 'nvidia-smi --query-gpu=name,memory.total,memory.free --format=csv,noheader' 2>&1) || true
check_eq "spark: a GB10's memory stays [N/A]" "NVIDIA GB10, [N/A], [N/A]" "$out"
# cuMemGetInfo in the primary context, as fleet-probe asks it, over ctypes
cuda_free='python3 -c "
import ctypes
cu = ctypes.CDLL(\"libcuda.so.1\")
ctx, free, total = ctypes.c_void_p(), ctypes.c_size_t(), ctypes.c_size_t()
assert cu.cuInit(0) == 0 and cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), 0) == 0
assert cu.cuCtxSetCurrent(ctx) == 0
assert cu.cuMemGetInfo_v2(ctypes.byref(free), ctypes.byref(total)) == 0
print(free.value, total.value)
"'
out=$(ssh_node 0 "$cuda_free" 2>&1) || true
check_eq "spark: the fake CUDA driver answers cuMemGetInfo" "103401336832 128526893056" "$out"
out=$(ssh_node 0 "sudo modprobe -r nvidia_drm && sudo modprobe nvidia_drm modeset=1 fbdev=0 && $cuda_free" 2>&1) || true
check_eq "spark: the display RAM unlock frees unlock_gain_bytes (2 GiB)" "105548820480 128526893056" "$out"
out=$(ssh_node 2 "$cuda_free 2>&1 | tail -n 1" 2>&1) || true
check_if "plain: no CUDA driver" "$out" globs "$out" '*libcuda.so.1*'
check "fleet-sim stop --purge (GPU sim)" "$SIM" stop "$GPU_DIR" --purge

# ---------------------------------------------------------------- disks
# --disk: the HF cache and the image storage on their own tmpfs, one
# filesystem for node and host; disk-fill makes the node's writes fail.
if "$SIM" start "$DISK_DIR" --nodes 1 --disk 16m >/dev/null 2>&1; then
	ok "fleet-sim start --disk 16m"
	DIR=$DISK_DIR
	read -r "PORTS[0]" "USERS[0]" "ROOTS[0]" < <(python3 -c '
import json, sys
n = json.load(open(sys.argv[1]))["nodes"][0]
print(n["port"], n["user"], n["root"])' "$DIR/sim.json")
	out=$(ssh_node 0 'echo from-node >/srv/hf/hub/x && df -B1M --output=size /srv/hf ~/.local/share/containers | tail -n +2 | tr -d " " | tr "\n" " "' 2>&1) || true
	check_eq "dgx1: /srv/hf and ~/.local/share/containers are 16 MiB each" "16 16 " "$out"
	check_eq "the host reads what the node wrote there" "from-node" "$(cat "${ROOTS[0]}/hf/hub/x" 2>&1)"
	check "disk-fill dgx1 hf 1M" "$SIM" disk-fill "$DIR" dgx1 hf 1M
	out=$(ssh_node 0 'head -c 2M /dev/zero 2>&1 >/srv/hf/hub/y; echo rc=$?' 2>&1) || true
	check_if "dgx1: writing 2 MiB there fails: no space left" "$out" globs "$out" '*No space left on device*rc=1'
	check "disk-fill dgx1 images 1M" "$SIM" disk-fill "$DIR" dgx1 images 1M
	out=$(ssh_node 0 'head -c 2M /dev/zero 2>&1 >~/.local/share/containers/y; echo rc=$?' 2>&1) || true
	check_if "dgx1: the image storage is full too" "$out" globs "$out" '*No space left on device*rc=1'
	check "disk-free dgx1" "$SIM" disk-free "$DIR" dgx1
	out=$(ssh_node 0 'head -c 2M /dev/zero >/srv/hf/hub/y && echo written' 2>&1) || true
	check_eq "dgx1: after disk-free the write fits" "written" "$out"
	check "fleet-sim stop --purge (disk sim)" "$SIM" stop "$DIR" --purge
	check "stop unmounts the disks" bash -c "! grep -qF '$DIR/' /proc/mounts"
else
	not_ok "fleet-sim start --disk 16m"
fi

# ---------------------------------------------------------------- --exec-cost
# A node where a process start is slow: sshd's re-exec and the session's
# shell pay it (so `ssh node true` does), and the accounting file counts them.
if "$SIM" start "$EXEC_DIR" --nodes 1 --names slow --exec-cost 1.5 >/dev/null 2>&1; then
	ok "fleet-sim start --exec-cost 1.5"
	read -r xport xuser xroot < <(python3 -c 'import json, sys; n = json.load(open(sys.argv[1]))["nodes"][0]; print(n["port"], n["user"], n["root"])' "$EXEC_DIR/sim.json")
	install -m 0666 /dev/null "$xroot/sim/exec.log"
	out=$(ssh -o StrictHostKeyChecking=yes -o UserKnownHostsFile="$EXEC_DIR/known_hosts" \
		-o BatchMode=yes -o ConnectTimeout=5 -o LogLevel=ERROR -i "$EXEC_DIR/id_ed25519" \
		-p "$xport" "$xuser@127.0.0.1" 'echo "$FLEET_SIM_EXEC_COST_MS"; /bin/true' 2>&1) || true
	check_eq "--exec-cost: the session has the cost" "1.5" "$out"
	out=$(awk '{ sub(".*/", "", $3); print $3 }' "$xroot/sim/exec.log" | sort | tr '\n' ' ')
	check_eq "--exec-cost: ssh node CMD starts sshd (re-exec), the shell and true, each counted" \
		"dash sshd true " "$out"
	"$SIM" stop "$EXEC_DIR" --purge >/dev/null 2>&1 || true
else
	not_ok "fleet-sim start --exec-cost 1.5"
fi

# ---------------------------------------------------------------- docker engine
# dgx1 docker (its own dockerd, GPU toolkit stand-in), dgx2 podman with its
# API service (podman-api; --engine mixed is docker, podman, ...).
if ! command -v dockerd >/dev/null; then
	echo "SKIP docker checks: dockerd not installed (apt-get install docker.io)"
	echo "$PASS passed, $FAIL failed"
	((FAIL == 0))
	exit
fi
if ! "$SIM" start "$DOCKER_DIR" --nodes 2 --engine dgx1=docker,dgx2=podman-api --gpu dgx1=gb10,dgx2=gb10 2>/dev/null; then
	not_ok "fleet-sim start --engine dgx1=docker,dgx2=podman-api"
	echo "$PASS passed, $FAIL failed"
	exit 1
fi
ok "fleet-sim start --engine dgx1=docker,dgx2=podman-api"
DIR=$DOCKER_DIR
declare -a ENGINES=()
while read -r n p u r e; do
	NAMES[${#ENGINES[@]}]=$n PORTS[${#ENGINES[@]}]=$p USERS[${#ENGINES[@]}]=$u ROOTS[${#ENGINES[@]}]=$r
	ENGINES+=("$e")
done < <(python3 -c '
import json, sys
for n in json.load(open(sys.argv[1]))["nodes"]:
    print(n["name"], n["port"], n["user"], n["root"], n["engine"])
' "$DIR/sim.json")
check_eq "sim.json: each node's engine" "docker podman" "${ENGINES[*]}"
check_eq "fleet.yaml: container_cli follows the engine" "docker podman" \
	"$(words "$(sed -n 's/^ *container_cli: //p' "$DIR/fleet.yaml")")"
# shellcheck disable=SC2016 # expanded on the node
out=$(ssh_node 0 'echo "$DOCKER_HOST"; stat -c "%U:%G %a" /run/docker.sock; docker version --format "{{.Server.Version}}"' 2>&1) || true
check_if "dgx1: DOCKER_HOST set by sshd, socket root:<node group> 660, daemon answers" "$out" \
	globs "$(words "$out")" "unix:///run/docker.sock root:${USERS[0]} 660 *"
out=$(ssh_node 1 'docker version --format "{{.Server.Version}}" 2>&1; echo "rc=$?"' 2>&1) || true
check_if "dgx2 (podman): the docker CLI is there, no daemon answers" "$out" globs "$out" "*Cannot connect*rc=1"
# shellcheck disable=SC2016 # expanded on the node
out=$(ssh_node 1 'curl -s --unix-socket "$XDG_RUNTIME_DIR/podman/podman.sock" http://d/_ping; echo; podman info --format "{{.Store.GraphDriverName}}"' 2>&1) || true
check_eq "dgx2 (podman-api): the user's podman service answers on its socket; storage overlay" "OK overlay" "$(words "$out")"
dpid=$(<"$DIR/nodes/dgx1/dockerd.pid")
check "dgx1's dockerd runs in the node's mount namespace" \
	test "$(readlink "/proc/$dpid/ns/mnt")" != "$(readlink /proc/self/ns/mnt)"
# a container on dgx1's daemon is not dgx2's user's: the socket's group
img=$(mktemp -d)
mkdir -p "$img/bin"
cp /bin/busybox "$img/bin/busybox"
ln -s busybox "$img/bin/sh"
tar -C "$img" -cf "$img.tar" .
out=$(ssh_node 0 'docker import - fleet-sim/bb:1 >/dev/null && docker run --rm --network=host --gpus all fleet-sim/bb:1 /bin/sh -c "echo in-container"' <"$img.tar" 2>&1) || true
check_eq "dgx1: docker run --gpus all runs (GPU toolkit stand-in)" "in-container" "$out"
check_if "dgx1: the hook recorded NVIDIA_VISIBLE_DEVICES=all" "$(cat "${ROOTS[0]}/sim/gpu-hook.log" 2>&1)" \
	grep -q 'prestart id=.* NVIDIA_VISIBLE_DEVICES=all$' "${ROOTS[0]}/sim/gpu-hook.log"
out=$(ssh_node 1 'podman import -q - fleet-sim/bb:1 >/dev/null && podman run --rm --device nvidia.com/gpu=all fleet-sim/bb:1 /bin/sh -c "echo \$FLEET_SIM_CDI_DEVICE"' <"$img.tar" 2>&1) || true
check_eq "dgx2: podman's CDI device nvidia.com/gpu=all (spec in /run/cdi)" "nvidia.com/gpu=all" "$out"
rm -rf "$img" "$img.tar"
out=$(ssh_node 0 'docker run -d --network=host fleet-sim/bb:1 /bin/sh -c "sleep 6017"' 2>&1) || true
check "node-stop dgx1" "$SIM" node-stop "$DIR" dgx1
check "node-stop stops dgx1's dockerd" test ! -e "/proc/$dpid"
check "and its container" bash -c "! pgrep -f 'sleep 601[7]' >/dev/null"
check "node-start dgx1" "$SIM" node-start "$DIR" dgx1
out=$(ssh_node 0 'docker ps -aq --filter status=exited | wc -l' 2>&1) || true
check_eq "dgx1 after node-start: the container is there, exited (as after a power cycle)" 1 "$out"
dpid=$(<"$DIR/nodes/dgx1/dockerd.pid")
ssh_node 0 'systemctl poweroff' >/dev/null 2>&1 || true
for ((i = 0; i < 200; i++)); do [[ -e /proc/$dpid ]] || break; sleep 0.05; done
check "poweroff on dgx1 stops its dockerd" test ! -e "/proc/$dpid"
"$SIM" node-start "$DIR" dgx1 >/dev/null 2>&1
dpid=$(<"$DIR/nodes/dgx1/dockerd.pid")
check "fleet-sim stop --purge (docker sim)" "$SIM" stop "$DIR" --purge
check "stop stops dgx1's dockerd" test ! -e "/proc/$dpid"

echo "$PASS passed, $FAIL failed"
((FAIL == 0))
