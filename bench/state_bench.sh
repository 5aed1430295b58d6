#!/usr/bin/env bash
# The postgres state backend against the local file, in one run (this
# machine is noisy, so each figure is a ratio of medians):
#   1. `fleet plan` on 32 converged simulated nodes (one state read);
#   2. `fleet apply` of 32 changes on those nodes (display RAM unlock, then
#      back), i.e. 32 state writes plus the lock, postgres vs local;
# The issue's bound: the backend adds at most one round trip per state write
# (PostgresStateStore::Save is one INSERT ... SELECT with its checks inside).
# Usage: bash bench/state_bench.sh [runs]   (root, after scripts/build.sh)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
FLEET=${FLEET:-$ROOT/build/src/engine/fleet}
SIM=$ROOT/tests/sim/fleet-sim
PG_SIM=$ROOT/tests/pg/pg-sim
RUNS=${1:-5}
WORK=$(mktemp -d /var/tmp/fleet-state-bench.XXXXXX)
trap '"$PG_SIM" kill "$WORK/pg" >/dev/null 2>&1 || true; "$SIM" stop "$WORK/sim" --purge >/dev/null 2>&1 || true; rm -rf "$WORK"' EXIT

median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
now_ms() { date +%s%N | awk '{printf "%.1f", $1/1e6}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN{printf "%.2f", a/b}'; }

chmod 0711 "$WORK"  # the server runs as the postgres user, under $WORK
export FLEET_STATE_PG
FLEET_STATE_PG=$("$PG_SIM" start "$WORK/pg")
"$SIM" start "$WORK/sim" --nodes 32 >/dev/null
all=$(python3 -c 'import json,sys; print(",".join(n["name"] for n in json.load(open(sys.argv[1]))["nodes"]))' "$WORK/sim/sim.json")
repo() {  # repo NAME BACKEND UNLOCK
  python3 "$ROOT/tests/integration/mkrepo.py" --sim "$WORK/sim" --out "$WORK/$1" \
    --state "{\"backend\": \"$2\"}" --unlock "$3"
}
fl() { "$FLEET" -C "$WORK/$1" --no-color "${@:2}" >/dev/null; }
timed() { local t0 t1; t0=$(now_ms); "$@"; t1=$(now_ms); awk -v a="$t0" -v b="$t1" 'BEGIN{print b-a}'; }

# Both repos converge on the same fleet (default display RAM everywhere).
repo local local ""; repo pg postgres ""
fl local apply --auto-approve; fl pg apply --auto-approve
plan_l=() plan_p=() apply_l=() apply_p=()
for _ in $(seq "$RUNS"); do
  plan_l+=("$(timed fl local plan --detailed-exitcode)")
  plan_p+=("$(timed fl pg plan --detailed-exitcode)")
  for backend in local pg; do
    b=$([[ $backend == pg ]] && echo postgres || echo local)
    repo "$backend" "$b" "$all"
    t=$(timed fl "$backend" apply --auto-approve)
    repo "$backend" "$b" ""
    t2=$(timed fl "$backend" apply --auto-approve)
    if [[ $backend == pg ]]; then apply_p+=("$t" "$t2"); else apply_l+=("$t" "$t2"); fi
  done
done
# Round trips per state write, counted by the server: committed
# transactions during one apply of 32 changes (each statement fleet sends
# outside a transaction is one) against the rows it saved.
sql() { psql -XAtq "$FLEET_STATE_PG" -c "$1"; }
xacts() { sleep 1.5; sql "SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()"; }
rows0=$(sql "SELECT count(*) FROM fleet.states"); x0=$(xacts)
repo pg postgres "$all"; fl pg apply --auto-approve
x1=$(xacts); rows1=$(sql "SELECT count(*) FROM fleet.states")
repo pg postgres ""; fl pg apply --auto-approve
# -2: the psql sessions reading the counters and counting the rows.
txn=$((x1 - x0 - 2)) saves=$((rows1 - rows0))
pl=$(printf '%s\n' "${plan_l[@]}" | median); pp=$(printf '%s\n' "${plan_p[@]}" | median)
al=$(printf '%s\n' "${apply_l[@]}" | median); ap=$(printf '%s\n' "${apply_p[@]}" | median)
writes=$(psql -XAtq "$FLEET_STATE_PG" -c "SELECT count(*) FROM fleet.states")
echo "plan, 32 converged nodes: postgres ${pp} ms, local ${pl} ms, ratio $(ratio "$pp" "$pl") ($RUNS runs)"
echo "apply, 32 changes (display RAM unlock: two saves each): postgres ${ap} ms, local ${al} ms, ratio $(ratio "$ap" "$al") ($((RUNS * 2)) applies each)"
echo "  postgres rows written: $writes (one INSERT per finished step, every version kept)"
echo "  one apply of 32 changes: $saves state writes, $txn statements in all (connect, schema check, lock, load, release: the rest), $(ratio "$txn" "$saves") per write"
