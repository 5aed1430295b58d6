#!/usr/bin/env bash
# Power follows demand (issue #46): dgx3 is power: on_demand and asleep;
# a gateway with wake on dgx2 hands requests for its model (beta) to
# `fleet watch --wake-listen`:
# - apply leaves the sleeping node alone (plan says asleep, converged), and
#   the watch's own checks neither wake it nor fail on it;
# - a client that cannot wait (Prefer: wait=1) gets the OpenAI 503 with
#   Retry-After naming the wake, and its retry is answered; the time from
#   request to answer beside the wake's parts (switch -> SSH, SSH -> ready);
#   converged after the wake;
# - asleep again (power cut): 10 concurrent requests, one wake, 10 answers;
# - a switch that ignores turn_on: the requests get the 503 naming it, one
#   switch call per backoff, alpha (always-on dgx1) keeps answering; then
#   the switch works but the node hangs in boot (no SSH): the 503 names
#   the node and SSH, the relay is cut again, one switch call per backoff;
#   once both work and the backoff passed, a request is answered;
# - a request while an apply that starts b holds the state lock: the wake
#   waits for it and applies nothing (one state write: the apply's);
# - idle off: a person's session, then a GPU process fleet did not start,
#   keep dgx3 on and say why; then it goes down in destroy order; the
#   energy figures;
# - a serve that fails its start while 3 requests wait: each gets the 503
#   naming it, one switch call, alpha keeps answering;
# - a schedule window (daily, UTC, ending 40-100 s from now): the watch
#   brings b up ahead of demand, idle off leaves it on, the window's end
#   takes dgx3 down in destroy order; plan shows the next transition;
# - the display RAM is restored after idle off and after a failed wake's
#   rollback (node and state agree);
# - the watch's HTML report draws each node's on and off time;
# - a node's own schedule: validate, plan and status show it; its window's
#   start powers on a node that holds no serve (once, display RAM as
#   declared, held on against idle off), counted by node in the metrics.
# Stand-ins at the lab's ratios: the OS boots 4 s after the relay closes
# (a GB10: ~3 min) and the engine 3 s after its start, against a hold of
# 60 s and a boot_timeout of 30 s (the lab: 10 min, 10 min).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/node_images.sh"

for tool in "$CE" busybox haproxy curl; do
  command -v "$tool" >/dev/null || { echo "SKIP: $tool not installed"; exit 77; }
done
[[ $ENGINE != mixed ]] || { echo "SKIP: one engine per run"; exit 77; }
need_fake_engine

SMOKE='[{"name": "math", "chat": "What is 127*89?", "expect": "11303", "timeout": "10s"}]'
deployment() {  # deployment NAME NODE PORT RECIPE [EXTRA-JSON]
  echo "$1={\"recipe\": \"recipes/$4.toml\", \"nodes\": [\"$2\"], \"image\": \"eng\", \"port\": $3, \"health\": {\"path\": \"/v1/models\", \"timeout\": \"30s\"}, \"smoke\": $SMOKE, \"restart\": {\"backoff\": \"3s\", \"max_backoff\": \"6s\"}${5:-}}"
}
WAKE_PORT=""
write_repo() {
  mkrepo --power --on-demand dgx3 --unlock dgx3 \
    --image "eng={\"ref\": \"$ENG\", \"source\": \"node:dgx1\"}" \
    --image "gw={\"ref\": \"$GWI\", \"source\": \"node:dgx1\"}" \
    --deployment "$(deployment a dgx1 30001 alpha)" \
    --deployment "$(deployment b dgx3 30003 beta ', "schedule": {"up": "Mon-Fri 08:00-20:00", "tz": "Europe/Berlin"}')"
  printf 'gateways:\n  lab: {nodes: [dgx2], image: gw, port: 8000, drain: 5s, wake: {hold: 60s, listener: 127.0.0.1:%s}}\n' \
    "$WAKE_PORT" >>"$REPO/fleet.yaml"
}
GW=127.0.0.1
ms() { echo $((${EPOCHREALTIME/./} / 1000)); }
chat() {  # chat MODEL [CURL-ARGS...]: status, then headers and body in $WORK/chat.*
  local model=$1
  shift
  curl -s -m 90 -D "$WORK/chat.h" -o "$WORK/chat.body" -w '%{http_code}' "$@" \
    "http://$GW:8000/v1/chat/completions" \
    -d "{\"model\":\"$model\",\"messages\":[{\"role\":\"user\",\"content\":\"What is 127*89?\"}]}"
}
turn_ons() { grep -c 'switch.dgx3 turn_on' "$SIMDIR/ha.log" || true; }
asleep_in_gateway() {  # waits until HAProxy marked b's serve down (2 checks 2 s apart)
  local i
  for i in $(seq 40); do
    curl -s -m 5 "http://$GW:8000/metrics" | grep -q '^haproxy_backend_active_servers{proxy="model_beta"} 0' && return 0
    sleep 0.5
  done
  fail "the gateway still counts beta's serve up"
}

step "3 nodes with switches; dgx3 asleep (switch off); images on dgx1"
start_fleet 3 --power
FLEET_SIM_HA_TOKEN=$(cat "$SIMDIR/ha_token")
export FLEET_SIM_HA_TOKEN
"$SIM" node-stop "$SIMDIR" dgx3
[[ $("$SIM" node-status "$SIMDIR" dgx3) == off ]] || fail "dgx3 not off"
echo 4000 >"$SIMDIR/nodes/dgx3/boot-ms"
ENG=$(import_image "$(engine_rootfs)" fleet/engine)
GWI=$(import_image "$(haproxy_rootfs)" fleet/haproxy --change "'ENV PATH=/usr/local/sbin:/usr/bin:/bin'")
hold_port 0
WAKE_PORT=$HELD_PORT
release_port
mkdir -p "$REPO/recipes"
model_recipe alpha alpha 'FAKE_ENGINE_BOOT_MS = "0"'
model_recipe beta beta 'FAKE_ENGINE_BOOT_MS = "3000"'
write_repo

step "apply leaves the sleeping node alone; the gateway gets a wake backup for beta; converged"
expect_rc 0 validate
expect_rc 2 plan --detailed-exitcode
expect_out "asleep (power: on_demand"
expect_rc 0 apply --auto-approve
[[ $("$SIM" node-status "$SIMDIR" dgx3) == off ]] || fail "apply woke dgx3"
on_node dgx2 "grep -q 'server fleet_wake 127.0.0.1:$WAKE_PORT backup' ~/.fleet/gateways/lab/haproxy.cfg" ||
  fail "no wake backup in the gateway's config: $(on_node dgx2 'cat ~/.fleet/gateways/lab/*.cfg')"
assert_converged
[[ $(turn_ons) == 0 ]] || fail "the switch was turned on"

step "fleet watch --heal --wake-listen: its own checks neither wake dgx3 nor fail on it"
"$FLEET" -C "$REPO" --no-color watch --every 1h --heal --wake-listen "127.0.0.1:$WAKE_PORT" \
  >"$WORK/watch.out" 2>&1 </dev/null &
WATCH=$!
BG_PIDS+=("$WATCH")
wait_output "$WORK/watch.out" "round 1:" 60
grep "round 1:" "$WORK/watch.out"
[[ $("$SIM" node-status "$SIMDIR" dgx3) == off && $(turn_ons) == 0 ]] || fail "the watch's round woke dgx3"

step "a client that cannot wait gets the 503 naming the wake; its retry is answered"
t0=$(ms)
code=$(chat beta -H 'Prefer: wait=1')
first_ms=$(($(ms) - t0))
[[ $code == 503 ]] || fail "the first request: $code $(cat "$WORK/chat.body")"
grep -qi '^retry-after: [0-9]' "$WORK/chat.h" || fail "no Retry-After: $(cat "$WORK/chat.h")"
grep -q '"message":"waking dgx3 for beta: ~' "$WORK/chat.body" || fail "the 503 does not name the wake: $(cat "$WORK/chat.body")"
grep -q '"code":"model_waking"' "$WORK/chat.body" || fail "the 503's code: $(cat "$WORK/chat.body")"
echo "   503 after $first_ms ms: $(cat "$WORK/chat.body")"
code=""
for _ in $(seq 60); do  # as an OpenAI SDK retries a 503
  code=$(chat beta)
  [[ $code == 200 ]] && break
  sleep 1
done
answer_ms=$(($(ms) - t0))
[[ $code == 200 ]] || fail "beta never answered: $code $(cat "$WORK/chat.body")"
grep -q 11303 "$WORK/chat.body" || fail "beta's answer: $(cat "$WORK/chat.body")"
wait_output "$WORK/watch.out" "wake deployment.b@dgx3: woken" 30
wait_output "$REPO/.fleet/state.json.events" '"event":"wake",' 10  # recorded after it is printed
wake=$(grep "\"event\":\"wake\"" "$REPO/.fleet/state.json.events" | tail -1)
echo "   request -> answer $answer_ms ms; the wake: $wake"
# The wake's parts are measured (switch -> SSH, SSH -> serve ready), they
# fit in the wake, and the wake in the request's time; what is left of the
# request beyond the wake is fleet's own share outside the apply.
python3 - "$wake" "$answer_ms" <<'PY' || fail "the wake's figures: $wake"
import json, sys
e, answer = json.loads(sys.argv[1]), int(sys.argv[2]) / 1000
p = e["parts"]
ssh, ready, took = p["power_on_to_ssh_s"], p["ssh_to_ready_s"], e["duration_s"]
assert ssh > 0 and ready > 0 and ssh + ready <= took + 0.5 and took <= answer + 0.5, (ssh, ready, took, answer)
print("   request -> answer %.1f s = wake %.1f s (switch -> SSH %.1f s, SSH -> ready %.1f s, "
      "the rest of the wake %.1f s) + the request beyond the wake %.1f s" %
      (answer, took, ssh, ready, took - ssh - ready, answer - took))
PY
[[ $("$SIM" node-status "$SIMDIR" dgx3) == on ]] || fail "dgx3 is not on"
[[ $(turn_ons) == 1 ]] || fail "$(turn_ons) turn_on calls for one wake"

step "awake: plan is empty, a second apply does nothing"
assert_converged

step "asleep again (power cut): 10 concurrent requests, one wake, 10 answers"
"$SIM" node-stop "$SIMDIR" dgx3
asleep_in_gateway
t0=$(ms)
pids=()
for i in $(seq 10); do
  curl -s -m 90 -o "$WORK/c$i.body" -w '%{http_code}' "http://$GW:8000/v1/chat/completions" \
    -d '{"model":"beta","messages":[{"role":"user","content":"What is 127*89?"}]}' >"$WORK/c$i.code" &
  pids+=($!)
done
for p in "${pids[@]}"; do wait "$p" || true; done
held_ms=$(($(ms) - t0))
for i in $(seq 10); do
  if [[ $(cat "$WORK/c$i.code") != 200 ]] || ! grep -q 11303 "$WORK/c$i.body"; then
    fail "request $i: $(cat "$WORK/c$i.code") $(cat "$WORK/c$i.body")"
  fi
done
[[ $(turn_ons) == 2 ]] || fail "$(turn_ons) turn_on calls: 10 requests made more than one wake"
[[ $(grep -c 'wake deployment.b@dgx3: woken' "$WORK/watch.out") == 2 ]] || fail "not one wake: $(grep '!!!' "$WORK/watch.out")"
echo "   10 held requests answered in $held_ms ms, one wake"

step "a switch that ignores turn_on: a clear 503 within a bound, one switch call per backoff, alpha answers"
"$SIM" node-stop "$SIMDIR" dgx3
asleep_in_gateway
"$SIM" switch "$SIMDIR" dgx3 ignore_on
before=$(turn_ons)
t0=$(ms)
code=$(chat beta)
took=$(($(ms) - t0))
[[ $code == 503 ]] || fail "a wake through a dead switch: $code"
grep -q 'did not follow turn_on' "$WORK/chat.body" || fail "the 503 does not name the switch: $(cat "$WORK/chat.body")"
((took < 20000)) || fail "the 503 took $took ms"
echo "   503 after $took ms: $(cat "$WORK/chat.body")"
for _ in 1 2 3; do
  code=$(chat beta)
  if [[ $code != 503 ]] || ! grep -q 'next try in' "$WORK/chat.body"; then
    fail "within the backoff: $code $(cat "$WORK/chat.body")"
  fi
done
[[ $(($(turn_ons) - before)) == 1 ]] || fail "$(($(turn_ons) - before)) switch calls within one backoff"
code=$(chat alpha)
[[ $code == 200 ]] || fail "alpha does not answer meanwhile: $code"
"$SIM" switch "$SIMDIR" dgx3 ok

step "a node that does not come back on SSH after turn_on: the 503 names it, the relay is cut, one switch call per backoff"
# The switch works now, but the OS hangs in boot: the relay closes (the
# switch reads on), sshd never answers. boot_timeout is cut to 5 s for this
# step (the watch's wake reads the manifests at each request).
"$SIM" boot-fault "$SIMDIR" dgx3 hang
sed -i 's/boot_timeout: 30s,/boot_timeout: 5s,/' "$REPO/fleet.yaml"
sleep 3  # the rest of the first backoff (3 s)
before=$(turn_ons)
offs=$(grep -c 'switch.dgx3 turn_off' "$SIMDIR/ha.log" || true)
t0=$(ms)
code=$(chat beta)
took=$(($(ms) - t0))
[[ $code == 503 ]] || fail "a wake of a node that hangs in boot: $code $(cat "$WORK/chat.body")"
grep -q '"message":"waking dgx3 for beta failed: node.dgx3: node dgx3 did not answer SSH within 5s after power on' "$WORK/chat.body" ||
  fail "the 503 does not name the node and SSH: $(cat "$WORK/chat.body")"
grep -q 'switch.dgx3 switched off again' "$WORK/chat.body" || fail "the 503 does not say the relay was cut: $(cat "$WORK/chat.body")"
grep -qi '^retry-after: [0-9]' "$WORK/chat.h" || fail "no Retry-After: $(cat "$WORK/chat.h")"
((took < 25000)) || fail "the 503 took $took ms"
echo "   503 after $took ms: $(cat "$WORK/chat.body")"
[[ $(grep -c 'switch.dgx3 turn_off' "$SIMDIR/ha.log") == $((offs + 1)) ]] || fail "the hung node's relay was not cut once"
[[ $("$SIM" node-status "$SIMDIR" dgx3) == off ]] || fail "dgx3 is on"
code=$(chat beta)
if [[ $code != 503 ]] || ! grep -q 'did not answer SSH.*next try in' "$WORK/chat.body"; then
  fail "within the backoff: $code $(cat "$WORK/chat.body")"
fi
[[ $(($(turn_ons) - before)) == 1 ]] || fail "$(($(turn_ons) - before)) switch calls within one backoff"
"$SIM" boot-fault "$SIMDIR" dgx3 ok
sed -i 's/boot_timeout: 5s,/boot_timeout: 30s,/' "$REPO/fleet.yaml"
sleep 6  # the second failure's backoff (6 s)
code=$(chat beta)
[[ $code == 200 ]] || fail "after the backoff, the switch and the boot fixed: $code $(cat "$WORK/chat.body")"
[[ $(($(turn_ons) - before)) == 2 ]] || fail "$(($(turn_ons) - before)) switch calls for two wakes"
assert_converged
[[ $(param dgx3 modeset) == Y ]] || fail "the wake did not unlock dgx3's display RAM"

step "a wake while an apply holds the state lock waits for it: b is applied once, by the apply"
# b's serve stops (the gateway sends beta's requests to the wake listener);
# an apply starts it again, and a request comes while that apply holds the
# lock: the wake waits, then finds nothing left to do (no step of its own).
ce dgx3 stop -t 1 fleet-b >/dev/null
asleep_in_gateway
wakes() { grep -c '"event":"wake",' "$REPO/.fleet/state.json.events" || true; }
wakes_before=$(wakes)
serial=$(state_serial)
before=$(turn_ons)
bg_apply
wait_output "$WORK/bg.out" "deployment.b@dgx3: (Creating|Modifying)" 30
code=$(chat beta)
wait "$bg" || fail "the apply failed: $(cat "$WORK/bg.out")"
[[ $code == 200 ]] && grep -q 11303 "$WORK/chat.body" || fail "beta during the apply: $code $(cat "$WORK/chat.body")"
[[ $(wakes) == $((wakes_before + 1)) ]] || fail "the request did not go through one wake"
grep '"event":"wake",' "$REPO/.fleet/state.json.events" | tail -1 | grep -q '"outcome":"woken"' ||
  fail "the wake: $(grep '"event":"wake",' "$REPO/.fleet/state.json.events" | tail -1)"
# One write of the state: the apply's. A wake that applied b beside it (or
# after it) would have written its own.
[[ $(state_serial) == $((serial + 1)) ]] || fail "the state was written $(($(state_serial) - serial)) times: b applied twice"
[[ $(turn_ons) == "$before" ]] || fail "the switch was called"
[[ $(grep -c 'deployment.b@dgx3: complete' "$WORK/bg.out") == 1 ]] || fail "the apply did not start b: $(cat "$WORK/bg.out")"

step "idle off: a person's session, then a GPU process not fleet's, keeps dgx3 on and says why; then it goes down in destroy order"
kill "$WATCH"
wait "$WATCH" 2>/dev/null || true
sed -i 's/boot_timeout: 30s, watts: 240}/boot_timeout: 30s, watts: 240, idle_off: 10s}/' "$REPO/fleet.yaml"
expect_rc 0 validate
# A person's interactive session, as sshd titles it ("sshd: alice@pts/9"):
# fleet-sim's sshd, not root, cannot allocate a terminal, so the stand-in is
# a process with that title on the node.
on_node dgx3 "rm -f person.pid; bash -c 'echo \$\$ >person.pid; exec -a \"sshd: alice@pts/9\" sleep 120'" </dev/null >/dev/null 2>&1 &
BG_PIDS+=($!)
for _ in $(seq 100); do on_node dgx3 'test -s person.pid' && break; sleep 0.1; done
hold_port 0
METRICS_PORT=$HELD_PORT
release_port
"$FLEET" -C "$REPO" --no-color -v watch --every 3s --heal --wake-listen "127.0.0.1:$WAKE_PORT" \
  --metrics-listen "127.0.0.1:$METRICS_PORT" --report "$WORK/report.html" \
  >"$WORK/watch2.out" 2>&1 </dev/null &
WATCH=$!
BG_PIDS+=("$WATCH")
wait_output "$WORK/watch2.out" "idle_off node.dgx3: kept" 40
grep -q "a person is logged in" "$WORK/watch2.out" || fail "kept, but not for the person: $(grep '!!!' "$WORK/watch2.out")"
[[ $("$SIM" node-status "$SIMDIR" dgx3) == on ]] || fail "dgx3 went down under a person's session"
# A compute process fleet did not start (outside any container) on the
# GPU: the person leaves, and it keeps dgx3 on in turn. The stand-in's
# nvidia-smi lists sim/gpu-apps; the node's check reads the process's own
# cgroup, which names the container runtime where this test itself runs
# in a container: there the process would pass for a container's, and
# the check is left out, saying so.
if grep -qE 'libpod|docker|containerd|crio' /proc/self/cgroup; then
  echo "   (the GPU process check is left out: this test runs in a container, $(grep -m1 -E 'libpod|docker|containerd|crio' /proc/self/cgroup))"
  # shellcheck disable=SC2016 # expanded on the node
  on_node dgx3 'kill "$(cat person.pid)"'
else
  on_node dgx3 "rm -f gpu.pid; bash -c 'echo \$\$ >gpu.pid; exec -a python3 sleep 120'" </dev/null >/dev/null 2>&1 &
  BG_PIDS+=($!)
  for _ in $(seq 100); do on_node dgx3 'test -s gpu.pid' && break; sleep 0.1; done
  gpu_pid=$(on_node dgx3 'cat gpu.pid')
  echo "$gpu_pid, python3" >"$(node_root dgx3)/sim/gpu-apps"
  # shellcheck disable=SC2016 # expanded on the node
  on_node dgx3 'kill "$(cat person.pid)"'
  wait_output "$WORK/watch2.out" "idle_off node.dgx3: kept.*kept on: a GPU process fleet did not start runs \($gpu_pid python3\)" 40
  [[ $("$SIM" node-status "$SIMDIR" dgx3) == on ]] || fail "dgx3 went down under a GPU process not fleet's"
  rm -f "$(node_root dgx3)/sim/gpu-apps"
  on_node dgx3 "kill $gpu_pid"
fi
t0=$(ms)
wait_output "$WORK/watch2.out" "idle_off node.dgx3: powered_off" 40
echo "   powered off $(($(ms) - t0)) ms after the last blocker left"
[[ $("$SIM" node-status "$SIMDIR" dgx3) == off ]] || fail "dgx3 is still on"
[[ $(param dgx3 modeset)/$(param dgx3 fbdev) == N/Y ]] || fail "idle off did not restore dgx3's display RAM"
# Destroy's order: the serve stops, display RAM is restored, then the
# node shuts down and its switch goes off (read back).
order=$(grep -nE '^idle off dgx3: (deployment.b@dgx3: complete|display_ram.dgx3: complete|node.dgx3: (Modifying|complete))' \
  "$WORK/watch2.out" | cut -d: -f1 | tr '\n' ' ')
read -r serve_done ram_done node_start node_done <<<"$order"
if [[ -z ${node_done:-} ]] || ! ((serve_done < ram_done && ram_done < node_start && node_start < node_done)); then
  fail "not in destroy order: $(grep -E '^idle off|idle_off' "$WORK/watch2.out")"
fi
[[ $(grep -c 'switch.dgx3 turn_off' "$SIMDIR/ha.log") -ge 1 ]] || fail "dgx3's switch was never turned off"
grep -q '"event":"idle_off"' "$REPO/.fleet/state.json.events" || fail "no idle_off event in the state's events"
expect_rc 0 plan --detailed-exitcode
expect_out "asleep (power: on_demand"
# The schedule does not act yet; the plan says where it stands and what is next.
expect_out "deployment.b@dgx3: schedule Mon-Fri 08:00-20:00 Europe/Berlin: "
grep -E "schedule Mon-Fri" "$WORK/out" | sed 's/^/   /'

step "the energy figures of the second watch's run (dgx3: 240 W declared)"
wait_output "$WORK/watch2.out" "round [0-9]+:.*" 10
sleep 4  # a round after the power off, so that the off time counts
curl -s -m 5 "http://127.0.0.1:$METRICS_PORT/metrics" >"$WORK/metrics"
grep -E '^fleet_(node_(on|off)_seconds_total|node_energy(_saved)?_kwh_total|wake_total|idle_off_total)\{[^}]*dgx3|^fleet_wake_total' \
  "$WORK/metrics" | sed 's/^/   /'
grep -q '^fleet_node_energy_kwh_total{node="dgx3"} ' "$WORK/metrics" || fail "no energy figure for dgx3: $(cat "$WORK/metrics")"
# Hours on and off both counted, and the kWh are those hours at the
# declared 240 W (drawn while on, saved while off).
python3 - "$WORK/metrics" <<'PY' || fail "dgx3's energy figures: $(grep 'dgx3' "$WORK/metrics")"
import re, sys
v = {m[1]: float(m[2]) for m in re.finditer(r'^fleet_node_(\w+)\{node="dgx3"\} (\S+)$', open(sys.argv[1]).read(), re.M)}
on, off = v["on_seconds_total"], v["off_seconds_total"]
assert on > 0 and off > 0, v
assert abs(v["energy_kwh_total"] - on * 240 / 3.6e6) < 1e-6, v
assert abs(v["energy_saved_kwh_total"] - off * 240 / 3.6e6) < 1e-6, v
print("   dgx3: %.1f s on (%.6f kWh at 240 W), %.1f s off (%.6f kWh saved)" %
      (on, v["energy_kwh_total"], off, v["energy_saved_kwh_total"]))
PY
grep -q '^fleet_idle_off_total{node="dgx3",outcome="powered_off"} 1$' "$WORK/metrics" ||
  fail "the idle power off is not counted: $(grep idle_off "$WORK/metrics")"

step "a schedule window: its start brings b up ahead of demand, idle off leaves it on, its end takes it down"
# A daily window in UTC that began 10 min ago: dgx3 is brought up at once.
# Once idle off has found it idle and left it on, the window's end is moved
# to the next minute (10-70 s away): the watch re-reads the manifests each
# round, and a window's minutes are all the test waits for.
hhmm() { date -u -d "@$1" +%H:%M; }
start=$((($(date -u +%s) / 60 - 10) * 60))
window="daily $(hhmm "$start")-$(hhmm $((start + 1200)))"
sed -i "s|\"up\": \"Mon-Fri 08:00-20:00\", \"tz\": \"Europe/Berlin\"|\"up\": \"$window\", \"tz\": \"UTC\"|" "$REPO/fleet.yaml"
grep -qF "$window" "$REPO/fleet.yaml" || fail "the window was not declared"
[[ $("$SIM" node-status "$SIMDIR" dgx3) == off ]] || fail "dgx3 is not asleep"
t0=$(ms)
wait_output "$WORK/watch2.out" "schedule deployment.b@dgx3: waking" 30
wait_output "$WORK/watch2.out" "wake deployment.b@dgx3: woken \(schedule\)" 60
echo "   $window: b up $(($(ms) - t0)) ms after the window was declared"
[[ $(param dgx3 modeset) == Y ]] || fail "the schedule's wake did not unlock dgx3's display RAM"
code=$(chat beta)
[[ $code == 200 ]] && grep -q 11303 "$WORK/chat.body" || fail "beta after the window's start: $code $(cat "$WORK/chat.body")"
wait_output "$WORK/watch2.out" "idle_off node.dgx3: kept.*deployment b's schedule $window" 40
[[ $("$SIM" node-status "$SIMDIR" dgx3) == on ]] || fail "dgx3 went down within its window"
now=$(date -u +%s)
end=$(((now / 60 + 1) * 60))
((end - now >= 10)) || end=$((end + 60))
sed -i "s|\"$window\"|\"daily $(hhmm "$start")-$(hhmm "$end")\"|" "$REPO/fleet.yaml"
window="daily $(hhmm "$start")-$(hhmm "$end")"
grep -qF "$window" "$REPO/fleet.yaml" || fail "the window's end was not moved"
expect_rc 0 plan
expect_out "deployment.b@dgx3: schedule $window UTC: up now; down at "
expect_out "$(hhmm "$end") UTC ($(hhmm "$end") UTC)"
wait_output "$WORK/watch2.out" "schedule deployment.b@dgx3: powered_off" $((end - $(date -u +%s) + 40))
echo "   taken down $(($(ms) - end * 1000)) ms after the window's end"
[[ $("$SIM" node-status "$SIMDIR" dgx3) == off ]] || fail "dgx3 is still on after its window"
order=$(grep -nE '^schedule down dgx3: (deployment.b@dgx3: complete|display_ram.dgx3: complete|node.dgx3: complete)' \
  "$WORK/watch2.out" | cut -d: -f1 | tr '\n' ' ')
read -r serve_done ram_done node_done <<<"$order"
if [[ -z ${node_done:-} ]] || ! ((serve_done < ram_done && ram_done < node_done)); then
  fail "not in destroy order: $(grep -E '^(wake b|schedule down)|!!!' "$WORK/watch2.out" | tail -40)"
fi
grep -q '"event":"schedule","nodes":\["dgx3"\],"outcome":"powered_off"' "$REPO/.fleet/state.json.events" ||
  fail "no schedule event in the state's events"
expect_rc 0 plan --detailed-exitcode
expect_out "deployment.b@dgx3: schedule $window UTC: down now; up at "
grep -E "schedule daily" "$WORK/out" | sed 's/^/   /'
expect_rc 0 status
expect_out "on_demand: asleep"
expect_out "deployment b: schedule $window UTC: down now; up at "

step "a serve that fails its start while requests wait: each gets the 503 naming it, one switch call, alpha answers"
[[ $("$SIM" node-status "$SIMDIR" dgx3) == off ]] || fail "dgx3 is not asleep"
asleep_in_gateway
sed -i 's/"--served-model-name", "beta"\]/"--served-model-name", "beta", "--no-such-flag", "1"]/' "$REPO/recipes/beta.toml"
grep -q no-such-flag "$REPO/recipes/beta.toml" || fail "the recipe was not broken"
before=$(turn_ons)
t0=$(ms)
pids=()
for i in 1 2 3; do
  curl -s -m 90 -D "$WORK/f$i.h" -o "$WORK/f$i.body" -w '%{http_code}' "http://$GW:8000/v1/chat/completions" \
    -d '{"model":"beta","messages":[{"role":"user","content":"What is 127*89?"}]}' >"$WORK/f$i.code" &
  pids+=($!)
done
sleep 1
code=$(chat alpha)
[[ $code == 200 ]] || fail "alpha does not answer while beta's wake runs: $code"
for p in "${pids[@]}"; do wait "$p" || true; done
took=$(($(ms) - t0))
for i in 1 2 3; do
  [[ $(cat "$WORK/f$i.code") == 503 ]] || fail "request $i: $(cat "$WORK/f$i.code") $(cat "$WORK/f$i.body")"
  grep -q '"message":"waking dgx3 for beta failed: deployment.b@dgx3: .*exit code 2' "$WORK/f$i.body" ||
    fail "request $i's 503 does not name the serve's failure: $(cat "$WORK/f$i.body")"
  grep -qi '^retry-after: [0-9]' "$WORK/f$i.h" || fail "request $i: no Retry-After"
done
((took < 45000)) || fail "the 503s took $took ms"
[[ $(($(turn_ons) - before)) == 1 ]] || fail "$(($(turn_ons) - before)) switch calls for one failed wake"
echo "   3 waiting requests got the 503 after $took ms: $(cat "$WORK/f1.body")"
# The rollback restored the display RAM it unlocked for the wake, on the
# node (as the state says: no unlock recorded).
[[ $(param dgx3 modeset)/$(param dgx3 fbdev) == N/Y ]] ||
  fail "the failed wake's rollback left dgx3's display RAM $(param dgx3 modeset)/$(param dgx3 fbdev)"
model_recipe beta beta 'FAKE_ENGINE_BOOT_MS = "3000"'

step "the watch's HTML report draws when each node was on"
CHROMIUM=$(command -v chromium || command -v chromium-browser || true)
[[ -n $CHROMIUM ]] || fail "chromium is not installed (apt-get install chromium)"
timeout 120 "$CHROMIUM" --headless --no-sandbox --disable-gpu --disable-background-networking \
  --user-data-dir="$WORK/chromium" --dump-dom "file://$WORK/report.html" >"$WORK/dom.html" 2>"$WORK/chromium.err" ||
  fail "chromium: $(tail -5 "$WORK/chromium.err")"
bands=$(grep -o 'data-power-bands="[^"]*"' "$WORK/dom.html" || true)
echo "   $bands"
[[ $bands =~ \"([0-9]+)\ on,\ ([0-9]+)\ off,\ ([0-9]+)\ events ]] || fail "no power chart: $(head -c 600 "$WORK/dom.html")"
((BASH_REMATCH[2] >= 1 && BASH_REMATCH[3] >= 3)) || fail "the power chart lacks dgx3's off time or its events: $bands"
grep -q '<title>dgx3 on from ' "$WORK/dom.html" && grep -q '<title>dgx3 off from ' "$WORK/dom.html" ||
  fail "dgx3 is not drawn both on and off"
grep -q '<title>dgx1 on from ' "$WORK/dom.html" || fail "dgx1 is not drawn on"

step "a node's own schedule: validate, plan and status show where it stands and its next transition"
kill "$WATCH"
wait "$WATCH" 2>/dev/null || true
sed -i '/watts: 240, idle_off: 10s}/a\    schedule: {up: "Mon-Fri 08:00-20:00", tz: Europe/Berlin}' "$REPO/fleet.yaml"
grep -q '^    schedule: {up: "Mon-Fri' "$REPO/fleet.yaml" || fail "dgx3's schedule was not declared"
expect_rc 0 validate
expect_rc 0 plan
expect_out "node.dgx3: schedule Mon-Fri 08:00-20:00 Europe/Berlin: "
grep -E "node.dgx3: schedule" "$WORK/out" | sed 's/^/   /'
expect_rc 0 status
expect_out "node: schedule Mon-Fri 08:00-20:00 Europe/Berlin: "

step "a node's own window powers on a node that holds no serve (a hot spare): once, display RAM as declared, held on"
# b leaves the manifests: dgx3 serves nothing, and its own window (daily
# in UTC, from 10 min ago) says up. The watch powers the node itself on
# through the wake path: switch on, read back, SSH, its display RAM
# unlocked as its `display_ram: unlocked` declares; no serve is started.
[[ $("$SIM" node-status "$SIMDIR" dgx3) == off ]] || "$SIM" node-stop "$SIMDIR" dgx3
[[ $("$SIM" node-status "$SIMDIR" dgx3) == off ]] || fail "dgx3 is not off"
sed -i '/^  b: {"recipe": "recipes\/beta.toml"/d' "$REPO/fleet.yaml"
! grep -q 'recipes/beta.toml' "$REPO/fleet.yaml" || fail "b is still declared"
start=$((($(date -u +%s) / 60 - 10) * 60))
window="daily $(hhmm "$start")-$(hhmm $((start + 1200)))"
sed -i "s|^    schedule: {up: \"Mon-Fri 08:00-20:00\", tz: Europe/Berlin}|    schedule: {up: \"$window\", tz: UTC}|" "$REPO/fleet.yaml"
grep -qF "schedule: {up: \"$window\", tz: UTC}" "$REPO/fleet.yaml" || fail "dgx3's window was not declared"
expect_rc 0 validate
[[ $(param dgx3 modeset) == N ]] || fail "dgx3's display RAM is already unlocked"
before=$(turn_ons)
hold_port 0
METRICS_PORT=$HELD_PORT
release_port
t0=$(ms)
"$FLEET" -C "$REPO" --no-color -v watch --every 3s --heal --wake-listen "127.0.0.1:$WAKE_PORT" \
  --metrics-listen "127.0.0.1:$METRICS_PORT" >"$WORK/watch3.out" 2>&1 </dev/null &
WATCH=$!
BG_PIDS+=("$WATCH")
wait_output "$WORK/watch3.out" "schedule node.dgx3: waking.*dgx3 asleep and holds no serve: powered on ahead of demand" 30
wait_output "$WORK/watch3.out" "wake node.dgx3: woken \(schedule\)" 60
echo "   $window: dgx3 on $(($(ms) - t0)) ms after the watch started"
[[ $("$SIM" node-status "$SIMDIR" dgx3) == on ]] || fail "dgx3 is not on"
[[ $(param dgx3 modeset) == Y ]] || fail "the node's wake did not unlock dgx3's display RAM as declared"
wait_output "$REPO/.fleet/state.json.events" '"address":"node.dgx3",.*"event":"wake",' 10
wake=$(grep -E '"address":"node.dgx3",.*"event":"wake",' "$REPO/.fleet/state.json.events" | tail -1)
echo "   the wake: $wake"
[[ $wake == *'"address":"node.dgx3"'* && $wake == *'"node":"dgx3"'* && $wake == *'"outcome":"woken"'* &&
  $wake == *'"reason":"schedule"'* && $wake != *'"deployment"'* ]] || fail "the node's wake event: $wake"
grep -q '"event":"schedule","node":"dgx3","nodes":\["dgx3"\],"outcome":"waking"' "$REPO/.fleet/state.json.events" ||
  fail "no schedule event for dgx3's window: $(grep '"event":"schedule"' "$REPO/.fleet/state.json.events" | tail -3)"
# Held on by its window against idle off (10 s, and no model to ask for),
# and not woken again: the rounds after find it on.
wait_output "$WORK/watch3.out" "idle_off node.dgx3: kept.*node dgx3's schedule $window" 40
[[ $("$SIM" node-status "$SIMDIR" dgx3) == on ]] || fail "dgx3 went down within its window"
[[ $(($(turn_ons) - before)) == 1 ]] || fail "$(($(turn_ons) - before)) switch calls for one node's window"
[[ $(grep -c 'wake node.dgx3: woken' "$WORK/watch3.out") == 1 ]] || fail "not one wake: $(grep '!!!' "$WORK/watch3.out")"
grep -q '^wake node dgx3: node.dgx3: complete' "$WORK/watch3.out" || fail "the wake's steps: $(grep '^wake' "$WORK/watch3.out")"
! grep -qE '^wake node dgx3: (deployment|image|model)\.' "$WORK/watch3.out" ||
  fail "the node's wake did more than the node: $(grep '^wake' "$WORK/watch3.out")"
# Counted by node, never under deployment="".
curl -s -m 5 "http://127.0.0.1:$METRICS_PORT/metrics" >"$WORK/metrics3"
grep -E '^fleet_(node_)?(schedule|wake)_total' "$WORK/metrics3" | sed 's/^/   /'
grep -q '^fleet_node_schedule_total{node="dgx3",outcome="waking"} 1$' "$WORK/metrics3" ||
  fail "the node's window is not counted by node: $(grep schedule_total "$WORK/metrics3")"
grep -q '^fleet_node_wake_total{node="dgx3",outcome="woken"} 1$' "$WORK/metrics3" ||
  fail "the node's wake is not counted by node: $(grep wake_total "$WORK/metrics3")"
! grep -q 'deployment=""' "$WORK/metrics3" || fail "a node's transition counted as deployment=\"\": $(grep 'deployment=""' "$WORK/metrics3")"
kill "$WATCH"
wait "$WATCH" 2>/dev/null || true

grep '!!!' "$WORK/watch.out" "$WORK/watch2.out" "$WORK/watch3.out"
