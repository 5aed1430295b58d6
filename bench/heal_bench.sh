#!/usr/bin/env bash
# fleet watch --heal against real serves: 3 simulated nodes (sshd each, the
# nodes' podman), one serve of the stand-in engine (tests/sim/fake_engine in
# a busybox image from a local registry) per node, restart policy
# {backoff 1s, max_backoff 2s, limit 1000 in 1h}, health /v1/models and one
# smoke chat each. In one run:
#   1. time from a kill (`podman kill fleet-NAME` on the node) to the serve
#      answering /v1/models again (curl every 50 ms), five kills round-robin,
#      under `fleet watch --heal --every 1s`; baseline: five kills each
#      followed at once by a plain `podman start` over ssh (what a person
#      typing the command gets at best, no detection), measured the same way;
#      printed as medians (min, max) and their ratio, beside the round length;
#   2. a soak: `fleet watch --heal --every 1s --rounds ROUNDS`, a serve
#      (round-robin) killed every KILL_EVERY rounds from round KILL_EVERY/2
#      on (the log's "round": N lines). Prints the kills, the kills healed
#      (a heal event "healed" for that serve after its kill, and the serve
#      answering again), the watch's RSS (VmRSS) and open fds every 50
#      rounds (the fds also as the low and the peak over the round that
#      follows: a round opens and closes its sessions, so one reading
#      depends on when it falls), each as end / round 100 (goal <= 1.10),
#      its zombie and ssh children at the end (goal 0), its own CPU time
#      (utime+stime) beside wall time, and the core count: the nodes' sshd,
#      podman and engines share those cores with it.
# Usage: bash bench/heal_bench.sh [ROUNDS] [KILL_EVERY]   (root, after
#        scripts/build.sh; defaults 1000 and 50). A round lasts --every 1s
#        or what its probes and checks take, if longer: 3-8 s on a loaded
#        2-core machine, where the defaults took 1 h 19 min.
set -euo pipefail
ROUNDS=${1:-1000}
KILL_EVERY=${2:-50}
((ROUNDS >= 120)) || { echo "ROUNDS: at least 120 (samples at round 100 and at the end)" >&2; exit 2; }
((KILL_EVERY >= 10)) || { echo "KILL_EVERY: at least 10 rounds" >&2; exit 2; }
source "$(dirname "$0")/../tests/integration/lib.sh"
source "$ROOT/tests/integration/registry.sh"
source "$ROOT/tests/integration/engine_image.sh"
[[ -x $FLEET ]] || { echo "build fleet first: bash scripts/build.sh" >&2; exit 1; }

echo "== $(date -u '+%F %T') UTC, $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')), load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "   fleet: $FLEET; engine: $ENGINE; rounds $ROUNDS, a kill every $KILL_EVERY rounds"

step "registry, engine image, 3 nodes, three serves (a@dgx1, b@dgx2, c@dgx3)"
registry_start
D=$(engine_image_push fleet/engine v1)
start_fleet 3 --insecure-registry "$REGISTRY"
mkdir -p "$REPO/recipes"
cat >"$REPO/recipes/e.toml" <<'TOML'
model = ""
args = ["fake-engine", "--port", "{port}", "--served-model-name", "qwen38"]
memory_limit = "256m"
TOML
SERVES=()
deployments=()
for pair in a:dgx1 b:dgx2 c:dgx3; do
  name=${pair%:*} n=${pair#*:}
  port=$(free_port)
  SERVES+=("$name:$n:$port")
  deployments+=(--deployment "$name={\"recipe\": \"recipes/e.toml\", \"nodes\": [\"$n\"], \"image\": \"eng\", \"port\": $port, \"health\": {\"path\": \"/v1/models\", \"timeout\": \"20s\"}, \"smoke\": [{\"name\": \"math\", \"chat\": \"What is 127*89?\", \"expect\": \"11303\", \"timeout\": \"10s\"}], \"restart\": {\"backoff\": \"1s\", \"max_backoff\": \"2s\", \"limit\": \"1000 in 1h\"}}")
done
mkrepo --image "eng={\"ref\": \"$REGISTRY/fleet/engine@$D\", \"source\": \"registry\"}" "${deployments[@]}"
expect_rc 0 apply --auto-approve
expect_rc 0 plan --detailed-exitcode
for s in "${SERVES[@]}"; do
  curl -sf -m 2 -o /dev/null "http://127.0.0.1:${s##*:}/v1/models" || fail "serve $s does not answer after apply"
done

step "kill to answering: plain podman start (baseline), then fleet watch --heal; then the soak"
set +e
/usr/bin/python3 - "$FLEET" "$REPO" "$SIMDIR" "$WORK" "$ROUNDS" "$KILL_EVERY" "${SERVES[@]}" <<'PY'
import json, os, signal, statistics, subprocess, sys, time

fleet, repo, simdir, work = sys.argv[1:5]
ROUNDS, KILL_EVERY = int(sys.argv[5]), int(sys.argv[6])
serves = []
for s in sys.argv[7:]:
    name, node, port = s.split(":")
    serves.append({"name": name, "node": node, "port": int(port),
                   "address": "deployment.%s@%s" % (name, node)})
sim = json.load(open(simdir + "/sim.json"))
nodes = {n["name"]: n for n in sim["nodes"]}
TICK = 0.05  # the poll period
mono = time.monotonic

def say(*a):
    print(*a, flush=True)

W = None  # the watch running now: never left behind

def die(msg):
    say("FAIL: " + msg)
    if W is not None and W.poll() is None:
        W.kill()
        W.wait()
    sys.exit(1)

def on_node(node, cmd):
    n = nodes[node]
    return subprocess.run(
        ["ssh", "-q", "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=yes",
         "-o", "KexAlgorithms=curve25519-sha256", "-o", "UserKnownHostsFile=%s/known_hosts" % simdir,
         "-i", "%s/id_ed25519" % simdir, "-p", str(n["port"]), "%s@%s" % (n["user"], n["address"]), cmd],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, text=True)

def ce(s, verb):  # the node's own engine CLI on the serve's container
    r = on_node(s["node"], "%s %s fleet-%s" % (nodes[s["node"]]["engine"], verb, s["name"]))
    if r.returncode != 0:
        die("%s %s fleet-%s on %s: %s" % (nodes[s["node"]]["engine"], verb, s["name"], s["node"], r.stdout.strip()))

def answers(s):
    return subprocess.run(["curl", "-sf", "-m", "1", "-o", "/dev/null",
                           "http://127.0.0.1:%d/v1/models" % s["port"]]).returncode == 0

def wait_down(s, limit=5.0):
    """True once the serve refuses (the kill landed)."""
    end = mono() + limit
    while mono() < end:
        if not answers(s):
            return True
        time.sleep(TICK)
    return False

def wait_up(s, t0, limit):
    """Seconds from t0 until the serve answers, polled every TICK; None past limit."""
    while mono() - t0 < limit:
        if answers(s):
            return mono() - t0
        time.sleep(TICK)
    return None

class Log:
    """The watch log's new complete JSON lines."""
    def __init__(self, path):
        self.path, self.pos, self.rest = path, 0, ""
    def read(self):
        try:
            with open(self.path) as f:
                f.seek(self.pos)
                data = f.read()
                self.pos = f.tell()
        except FileNotFoundError:
            return []
        data = self.rest + data
        lines = data.split("\n")
        self.rest = lines.pop()
        return [json.loads(l) for l in lines if l.strip()]

def start_watch(log, extra=()):
    out = open(work + "/watch.out", "ab")
    err = open(work + "/watch.err", "ab")
    global W
    W = subprocess.Popen([fleet, "-C", repo, "--no-color", "watch", "--heal", "--every", "1s",
                          "--log", log, *extra], stdout=out, stderr=err, stdin=subprocess.DEVNULL)
    return W

def fmt3(v):
    return "median %.2f s (min %.2f, max %.2f)" % (statistics.median(v), min(v), max(v))

# ---- 1. kill to answering ------------------------------------------------
say("-- baseline: podman kill, then at once a plain `podman start` over ssh, curl every 50 ms")
base = []
for i in range(5):
    s = serves[i % 3]
    ce(s, "kill")
    t0 = mono()
    if not wait_down(s):
        die("%s still answers 5 s after its kill" % s["address"])
    ce(s, "start")
    t = wait_up(s, t0, 60)
    if t is None:
        die("%s does not answer 60 s after podman start" % s["address"])
    base.append(t)
    say("   kill %d %s: answering after %.2f s" % (i + 1, s["address"], t))
    time.sleep(1)

say("-- fleet watch --heal --every 1s: podman kill, curl every 50 ms")
log1 = work + "/watch-kills.jsonl"
w = start_watch(log1)
L = Log(log1)
last_round, events1, arrivals1 = 0, [], []
def pump():
    global last_round
    for e in L.read():
        if "event" in e:
            e["_round"] = last_round
            events1.append(e)
        elif "round" in e:
            last_round = e["round"]
            arrivals1.append(mono())
    if w.poll() is not None:
        die("fleet watch exited %s: %s" % (w.returncode, open(work + "/watch.err").read()[-2000:]))
def wait_rounds(n, limit=60):
    target, end = last_round + n, mono() + limit
    while last_round < target:
        if mono() > end:
            die("no %d rounds within %d s" % (n, limit))
        pump()
        time.sleep(TICK)
wait_rounds(2)
heal_t, heal_dur, heal_rounds = [], [], []
for i in range(5):
    s = serves[i % 3]
    n_before = len(events1)
    ce(s, "kill")
    t0 = mono()
    r0 = last_round
    if not wait_down(s):
        die("%s still answers 5 s after its kill" % s["address"])
    t = None
    while mono() - t0 < 60:
        pump()
        if answers(s):
            t = mono() - t0
            break
        time.sleep(TICK)
    if t is None:
        die("%s not answering 60 s after its kill: %s" % (s["address"], events1[n_before:]))
    heal = None
    end = mono() + 30
    while heal is None and mono() < end:
        pump()
        heal = next((e for e in events1[n_before:] if e.get("address") == s["address"]
                     and e.get("event") == "heal"), None)
        time.sleep(TICK)
    if heal is None or heal.get("outcome") != "healed":
        die("%s answers again but the log has no heal healed event for it: %s" % (s["address"], heal))
    heal_t.append(t)
    heal_dur.append(heal.get("duration_s", 0))
    heal_rounds.append(heal["_round"] - r0)
    say("   kill %d %s: answering after %.2f s (the heal event's duration_s %.2f, in round %d after the kill's round %d)"
        % (i + 1, s["address"], t, heal_dur[-1], heal["_round"], r0))
    wait_rounds(3)
other = [e for e in events1 if not (e.get("event") == "heal" and e.get("outcome") == "healed")]
w.send_signal(signal.SIGTERM)
try:
    rc = w.wait(60)
except subprocess.TimeoutExpired:
    w.kill()
    die("fleet watch did not stop within 60 s of SIGTERM")
if rc != 0:
    die("fleet watch exited %d after SIGTERM" % rc)
def periods(a):
    return [y - x for x, y in zip(a, a[1:])]
say("RESULT kill to answering: fleet watch --heal --every 1s (round length 1 s; measured start to start: %s): %s; heal step itself (duration_s) median %.2f s"
    % (fmt3(periods(arrivals1)), fmt3(heal_t), statistics.median(heal_dur)))
say("RESULT kill to answering: plain podman start right after the kill (baseline): %s" % fmt3(base))
say("RESULT ratio fleet / baseline (medians): %.2f; fleet minus baseline: %.2f s (detection: up to one 1 s round, plus the round's probe)"
    % (statistics.median(heal_t) / statistics.median(base), statistics.median(heal_t) - statistics.median(base)))
if other:
    say("NOTE other heal events in part 1: %s" % [(e["event"], e["address"], e["outcome"], e.get("detail", "")[:120]) for e in other])

# ---- 2. soak -------------------------------------------------------------
say("-- soak: fleet watch --heal --every 1s --rounds %d, a kill every %d rounds (round-robin)" % (ROUNDS, KILL_EVERY))
HZ = os.sysconf("SC_CLK_TCK")
log2 = work + "/watch-soak.jsonl"
w = start_watch(log2, ["--rounds", str(ROUNDS)])
pid = w.pid
t_start = mono()
L = Log(log2)

def children(pid):
    r = subprocess.run(["ps", "--ppid", str(pid), "-o", "pid=,stat=,comm="], stdout=subprocess.PIPE, text=True)
    return [l.split(None, 2) for l in r.stdout.splitlines() if l.strip()]

def sample(rnd):
    st = {}
    for l in open("/proc/%d/status" % pid):
        k, _, v = l.partition(":")
        st[k] = v.strip()
    fds = os.listdir("/proc/%d/fd" % pid)
    socks = 0
    for fd in fds:
        try:
            socks += os.readlink("/proc/%d/fd/%s" % (pid, fd)).startswith("socket:")
        except OSError:
            pass
    f = open("/proc/%d/stat" % pid).read().rsplit(")", 1)[1].split()
    cpu = (int(f[11]) + int(f[12])) / HZ  # utime, stime (fields 14, 15)
    kids = children(pid)
    return {"round": rnd, "rss_kb": int(st["VmRSS"].split()[0]), "fds": len(fds), "sockets": socks,
            "fds_min": len(fds), "fds_max": len(fds),
            "threads": int(st["Threads"]), "children": len(kids),
            "zombies": sum(1 for k in kids if "Z" in k[1]),
            "ssh": sum(1 for k in kids if len(k) > 2 and k[2].startswith("ssh")),
            "cpu_s": cpu, "wall_s": mono() - t_start}

# "end": ROUNDS - 2, so that the round its fds are followed over is not
# the last one (the watch exits right after it, closing its files)
END = ROUNDS - 2
sample_at = sorted(set(range(50, END, 50)) | {100, END})
# kills half a period off the samples (every 50 rounds), so that the round a
# sample follows holds no heal: 25, 75, ... with KILL_EVERY 50
kill_at = [r for r in range(KILL_EVERY // 2, ROUNDS, KILL_EVERY) if r + 10 <= END]
samples, kills, unprompted, events2, arrivals2 = [], [], [], [], []
rounds_failed_checks, rounds_drift, rounds_errors = 0, 0, 0
last_round, ru, status = 0, None, None
window = None  # the sample whose fds are followed over the next round


def note_event(e, rnd):
    """An event of the watch log, matched to the oldest kill of its serve
    not yet healed (none: an event no kill prompted)."""
    e["_round"] = rnd
    events2.append(e)
    k = next((k for k in kills if k["serve"]["address"] == e.get("address") and k["heal"] is None), None)
    if k is None:
        unprompted.append(e)
    elif e.get("event") == "heal" and e.get("outcome") == "healed":
        k["heal"] = e
    else:
        k["other"].append(e)


while True:
    got, status, ru = os.wait4(pid, os.WNOHANG)
    if got == pid:
        break
    if window is not None:
        try:
            nfd = len(os.listdir("/proc/%d/fd" % pid))
            window["fds_min"] = min(window["fds_min"], nfd)
            window["fds_max"] = max(window["fds_max"], nfd)
        except OSError:
            window = None
    for e in L.read():
        if "event" in e:
            note_event(e, last_round)
        elif "round" in e:
            last_round = e["round"]
            arrivals2.append(mono())
            if window is not None and last_round > window["round"]:
                window = None
            checks = e.get("checks", [])
            rounds_failed_checks += any(c.get("result") != "pass" for c in checks)
            rounds_drift += (e.get("drift") or {}).get("changes", 0) > 0
            rounds_errors += bool(e.get("error") or (e.get("drift") or {}).get("errors"))
    # samples first, then a kill due at the same round
    while sample_at and last_round >= sample_at[0]:
        label = sample_at.pop(0)
        if last_round > label and sample_at and last_round >= sample_at[0]:
            continue  # the monitor fell behind: the newer one
        try:
            sm = sample(last_round)
        except (FileNotFoundError, ProcessLookupError, KeyError, IndexError):
            break
        sm["label"] = label
        samples.append(sm)
        window = sm
        say("   round %4d: RSS %6d kB, %3d fds (%d sockets), %d threads, %d children (%d zombie, %d ssh), CPU %.1f s in %.0f s"
            % (last_round, sm["rss_kb"], sm["fds"], sm["sockets"], sm["threads"], sm["children"],
               sm["zombies"], sm["ssh"], sm["cpu_s"], sm["wall_s"]))
    if kill_at and last_round >= kill_at[0]:
        kill_at.pop(0)
        s = serves[len(kills) % 3]
        ce(s, "kill")
        kills.append({"serve": s, "round": last_round, "t0": mono(), "down": None, "up": None,
                      "heal": None, "other": []})
    for k in kills:
        if k["up"] is not None or k["down"] is False:
            continue
        if k["down"] is None:
            if not answers(k["serve"]):
                k["down"] = True
            elif mono() - k["t0"] > 5:
                k["down"] = False  # the kill did not land
        elif answers(k["serve"]):
            k["up"] = mono() - k["t0"]
    time.sleep(TICK)
wall = mono() - t_start
rc = os.waitstatus_to_exitcode(status)
for e in L.read():  # what the last round wrote
    if "event" in e:
        note_event(e, last_round)
    elif "round" in e:
        last_round = e["round"]
# a kill whose serve was still coming back when the watch ended
for k in kills:
    if k["up"] is None and k["down"]:
        t = wait_up(k["serve"], mono(), 1)
        k["late"] = t is not None

say("")
say("soak table (every 50 rounds, each taken as the round's line reaches the log, the fds also over"
    " the round after it; 'end' = round %d of %d):" % (END, ROUNDS))
say("| round | RSS kB | open fds | fds over the next round, low-peak | sockets | threads | children | zombies | ssh children | CPU s | wall s |")
say("|---|---|---|---|---|---|---|---|---|---|---|")
for sm in samples:
    say("| %d | %d | %d | %d-%d | %d | %d | %d | %d | %d | %.1f | %.0f |" % (
        sm["round"], sm["rss_kb"], sm["fds"], sm["fds_min"], sm["fds_max"], sm["sockets"], sm["threads"], sm["children"],
        sm["zombies"], sm["ssh"], sm["cpu_s"], sm["wall_s"]))
say("")
say("kills (round, serve, seconds to answering, heal event):")
for k in kills:
    h = k["heal"]
    say("   round %4d %-20s %s  %s%s" % (
        k["round"], k["serve"]["address"],
        ("%.2f s" % k["up"]) if k["up"] is not None else ("DID NOT LAND" if k["down"] is False else "NOT ANSWERING"),
        ("heal healed in round %d, duration_s %.2f" % (h["_round"], h.get("duration_s", 0))) if h else "NO HEAL EVENT",
        ("; also: %s" % [(e["event"], e["outcome"], e.get("detail", "")[:160]) for e in k["other"]]) if k["other"] else ""))
healed = [k for k in kills if k["heal"] is not None and k["up"] is not None]
r100 = next((sm for sm in samples if sm["label"] == 100), None)
end = next((sm for sm in samples if sm["label"] == END), None)
ups = [k["up"] for k in kills if k["up"] is not None]
say("")
pp = sorted(periods(arrivals2))
say("RESULT soak: %d rounds logged of %d, watch exit %d, wall %.0f s (%.2f s a round on average, --every 1s; start to start median %.2f s, 90th percentile %.2f s, max %.2f s)"
    % (last_round, ROUNDS, rc, wall, wall / max(last_round, 1), statistics.median(pp), pp[int(0.9 * (len(pp) - 1))], pp[-1]))
say("RESULT soak: kills %d, kills healed %d (heal event healed and the serve answering again)%s"
    % (len(kills), len(healed), ("; kill to answering %s" % fmt3(ups)) if ups else ""))
by = {}
for e in events2:
    key = "%s/%s" % (e.get("event"), e.get("outcome"))
    by[key] = by.get(key, 0) + 1
say("RESULT soak: events in the log: %s; events with no kill before them: %d" % (by, len(unprompted)))
for e in unprompted[:20]:
    say("   unprompted: round %s %s %s %s %s: %s" % (e.get("_round"), e.get("time"), e.get("event"), e.get("address"),
                                                   e.get("outcome"), e.get("detail", "")[:200]))
say("RESULT soak: rounds with a failed check %d, with drift %d, with plan errors %d"
    % (rounds_failed_checks, rounds_drift, rounds_errors))
if r100 and end:
    say("RESULT soak: RSS round 100 %d kB, round %d %d kB: ratio %.3f (goal <= 1.10)"
        % (r100["rss_kb"], end["round"], end["rss_kb"], end["rss_kb"] / r100["rss_kb"]))
    say("RESULT soak: open fds round 100 %d, round %d %d: ratio %.3f (goal <= 1.10); over the round after each,"
        " low %d -> %d: ratio %.3f, peak %d -> %d: ratio %.3f"
        % (r100["fds"], end["round"], end["fds"], end["fds"] / r100["fds"],
           r100["fds_min"], end["fds_min"], end["fds_min"] / r100["fds_min"],
           r100["fds_max"], end["fds_max"], end["fds_max"] / r100["fds_max"]))
    say("RESULT soak: at the end: %d zombie children, %d ssh children (goal 0), %d children in all"
        % (end["zombies"], end["ssh"], end["children"]))
    say("RESULT soak: the watch's own CPU (utime+stime, /proc/PID/stat) %.1f s in %.0f s wall up to round %d = %.1f%% of one core, %.0f ms a round; with what it waited for, at its exit (wait4): %.1f s"
        % (end["cpu_s"], end["wall_s"], end["round"], 100 * end["cpu_s"] / end["wall_s"],
           1000 * end["cpu_s"] / end["round"], ru.ru_utime + ru.ru_stime))
else:
    say("RESULT soak: no sample at round 100 or at the end (the watch ended early?)")
say("RESULT machine: %d cores (nproc); the 3 simulated nodes' sshd, podman, conmon and engines, and this monitor's curl and ssh, share them with the watch"
    % os.cpu_count())
ok = rc == 0 and last_round == ROUNDS and len(healed) == len(kills) and r100 and end
sys.exit(0 if ok else 3)
PY
rc=$?
set -e
prc=0
fl plan --detailed-exitcode || prc=$?
echo "after the soak: fleet plan --detailed-exitcode exited $prc (0: converged)"
((prc == 0)) || { cat "$WORK/out" "$WORK/err"; ((rc != 0)) || rc=4; }
echo "== $(date -u '+%F %T') UTC, load $(cut -d' ' -f1-3 /proc/loadavg) at the end"
[[ $rc == 0 ]] || fail "the bench found a problem (exit $rc): see above; watch stderr: $(tail -5 "$WORK/watch.err" 2>/dev/null)"
echo "PASS heal_bench"
