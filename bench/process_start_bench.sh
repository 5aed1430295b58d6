#!/usr/bin/env bash
# Calibration of fleet-sim's --exec-cost (tests/sim/exec_cost.c), the
# stand-in for a machine where a process start is slow: what a process
# start costs on a simulated node with the stand-in and without it, in the
# same run, in turn (without, with, without, ...):
#   - `/bin/true` and `sh -c true` started N times in a loop on the node
#     (bash's loop: fork + exec + the loader): wall and CPU (user+sys) per
#     start;
#   - `ssh node true` from here (OpenSSH, curve25519), which pays the cost
#     in the node's sshd re-exec and in its session's shell: the baseline
#     plan_bench.sh divides by.
# Usage: bash bench/process_start_bench.sh [MS] [rounds] [starts]   (root)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
SIM=$ROOT/tests/sim/fleet-sim
COST=${1:-2.5}
ROUNDS=${2:-5}
STARTS=${3:-200}
WORK=$(mktemp -d /var/tmp/fleet-pstart.XXXXXX)
trap '"$SIM" stop "$WORK/plain" --purge >/dev/null 2>&1 || true; "$SIM" stop "$WORK/slow" --purge >/dev/null 2>&1 || true; rm -rf "$WORK"' EXIT
FLEET_SIM_EXEC_COST_MS='' "$SIM" start "$WORK/plain" --nodes 1 --names plain >/dev/null
"$SIM" start "$WORK/slow" --nodes 1 --names slow --exec-cost "$COST" >/dev/null

python3 - "$WORK" "$ROUNDS" "$STARTS" "$COST" <<'PY'
import json, statistics, subprocess, sys, time
work, rounds, starts, cost = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]

def ssh(sim, cmd, kex=True):
    s = json.load(open("%s/%s/sim.json" % (work, sim)))
    n = s["nodes"][0]
    return ["ssh", "-q", "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=yes",
            "-o", "UserKnownHostsFile=" + s["known_hosts"], "-i", s["identity"],
            *(["-o", "KexAlgorithms=curve25519-sha256"] if kex else []),
            "-p", str(n["port"]), "%s@127.0.0.1" % n["user"], cmd]

# On the node: bash's `times` before and after a loop of starts gives the
# children's CPU; its EPOCHREALTIME the wall.
LOOP = ("t0=$EPOCHREALTIME; for ((i=0;i<%d;i++)); do %%s; done; t1=$EPOCHREALTIME; "
        "times; echo $t0 $t1" % starts)
def per_start(sim, what):
    out = subprocess.run(ssh(sim, "bash -c " + repr(LOOP % what)), capture_output=True,
                         text=True, check=True).stdout.split("\n")
    # times: the shell's user and sys, then its children's
    cu, cs = (float(x[:-1].split("m")[0]) * 60 + float(x[:-1].split("m")[1]) for x in out[1].split())
    t0, t1 = (float(x) for x in out[2].split())
    return 1e3 * (t1 - t0) / starts, 1e3 * (cu + cs) / starts

m = {}
for _ in range(rounds):
    for sim in ("plain", "slow"):
        for what in ("/bin/true", "sh -c true"):
            w, c = per_start(sim, what)
            m.setdefault((sim, what, "wall"), []).append(w)
            m.setdefault((sim, what, "cpu"), []).append(c)
        t = time.monotonic()
        subprocess.run(ssh(sim, "true"), check=True)
        m.setdefault((sim, "ssh true", "wall"), []).append(1e3 * (time.monotonic() - t))

print("--exec-cost %s ms, %d rounds of %d starts each (median, min-max)" % (cost, rounds, starts))
for what in ("/bin/true", "sh -c true", "ssh true"):
    for kind in ("wall", "cpu"):
        if (("plain", what, kind)) not in m:
            continue
        row = []
        for sim in ("plain", "slow"):
            v = m[(sim, what, kind)]
            row.append("%s %.2f ms (%.2f-%.2f)" % ("without" if sim == "plain" else "with",
                                                   statistics.median(v), min(v), max(v)))
        print("%-11s %-4s per start: %s" % (what, kind, ", ".join(row)))
PY
