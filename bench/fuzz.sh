#!/usr/bin/env bash
# Coverage-guided fuzzing of every parser fleet feeds untrusted bytes to.
#
#   bench/fuzz.sh SECONDS [JOBS] [TARGET...]
#   bench/fuzz.sh --until EXECS [JOBS] [TARGET...]
#   bench/fuzz.sh 0          # the table of every target's last run again
#
# Builds the fuzz build (build-fuzz/, clang-16, -Dfuzz=true: libFuzzer with
# ASan and UBSan), then runs each target (all of fuzz/ by default) for
# SECONDS, or with --until until its executions over every run kept in
# build-fuzz/fuzz-work/ reach EXECS (each target stops at its goal; the
# total is saved every FUZZ_CHUNK_SECONDS, default 600, so an interrupted
# run keeps what it did), JOBS targets at a time (default 1), and prints a
# table: target, executions (this run, per second of wall time, per second
# of the target's own CPU time, and in total over every run kept), coverage
# (edges: libFuzzer's `cov:`), crashes, hangs (an input that replays in
# > 1 s on its own; "(+N-slow)": inputs that tripped the 1 s limit only
# under load), leaks, out-of-memory (> 2 GB).
# A finding does not end the run (the target is restarted); the inputs are
# kept as build-fuzz/fuzz-work/<target>/artifacts/{crash,timeout,leak,oom}-*,
# and each crash or leak is replayed with full allocation stacks into
# build-fuzz/fuzz-work/<target>/reports/<artifact>.txt.
# Each target's corpus grows in build-fuzz/fuzz-work/<target>/corpus across
# runs, seeded from fuzz/corpus/<target>/. Exit status 1 when anything was
# found.
set -euo pipefail
cd "$(dirname "$0")/.."
usage="usage: bench/fuzz.sh SECONDS|--until EXECS [JOBS] [TARGET...]"
goal=0  # --until: each target's total executions to reach
if [[ ${1:-} == --until ]]; then
  goal="${2:?$usage}"
  shift
  seconds=1
  if ! [[ $goal =~ ^[0-9]+$ ]] || ((goal == 0)); then echo "$usage" >&2; exit 2; fi
else
  seconds="${1:?$usage}"
fi
jobs="${2:-1}"
shift $(($# >= 2 ? 2 : 1))
chunk="${FUZZ_CHUNK_SECONDS:-600}"
build=build-fuzz
# Optimized (meson.build then compiles at -O1 under the sanitizers, as
# OSS-Fuzz builds): at -O0 the targets ran 2 to 16 times slower (docs/testing.md).
# fuzz/replay.sh sets up the same folder at -O0 when run by hand (a quick
# build for a short run); such a build is switched to optimized here.
cc=clang-16 cxx=clang++-16
! command -v ccache >/dev/null || cc="ccache $cc" cxx="ccache $cxx"
if [[ ! -f $build/build.ninja ]]; then
  CC="$cc" CXX="$cxx" meson setup $build -Dfuzz=true --buildtype=debugoptimized >/dev/null
fi
optimization() {  # meson's option: 0, or anything else for -O1 (meson.build)
  meson introspect $build --buildoptions |
    python3 -c 'import json,sys; print(next(o["value"] for o in json.load(sys.stdin) if o["name"] == "optimization"))'
}
if [[ $(optimization) == 0 && -z "${FUZZ_NO_BUILD:-}" ]]; then
  echo "bench/fuzz.sh: $build was set up at -O0, reconfiguring it optimized" >&2
  meson configure $build -Dbuildtype=debugoptimized >/dev/null
fi
[[ -n "${FUZZ_NO_BUILD:-}" ]] || ninja -C $build fuzzers >/dev/null
targets=("$@")
if ((${#targets[@]} == 0)); then
  for bin in $build/fuzz/*_fuzzer; do targets+=("$(basename "$bin" _fuzzer)"); done
fi

# Throughput settings of these runs (docs/testing.md, "Hostile input: fuzzing"):
# - ASan records 2 frames of each allocation's stack, not 30 (recording them
#   took up to a tenth of the time: every JSON node is an allocation); 2 is
#   the fewest with which LeakSanitizer still reports a leak (at 0 or 1 it
#   reports none). What ASan detects is unchanged; a crash's report then
#   lacks the allocation's callers, so each new crash or leak is replayed
#   with full stacks into reports/. ASAN_OPTIONS given to this script win.
# - libFuzzer's entropic schedule stays on, but counts a feature as rare
#   below 32 hits rather than 255 and keeps at least the 50 rarest rather
#   than 100: its list of rare features, scanned for every feature of every
#   execution, took a fifth to a third of the time.
asan_given="${ASAN_OPTIONS:-}"
export ASAN_OPTIONS="malloc_context_size=2${asan_given:+:$asan_given}"
fuzz_flags=(-timeout=1 -rss_limit_mb=2048 -print_final_stats=1 -print_funcs=0
            -entropic_feature_frequency_threshold=32 -entropic_number_of_rarest_features=50)

# One target for `seconds` in all, or (--until) until its total reaches
# `goal`. libFuzzer stops at its first finding, so it is restarted (the
# corpus kept) until the time or the goal is reached; each finding is kept
# as build-fuzz/fuzz-work/<target>/artifacts/{crash,timeout,leak,oom}-*.
# The targets that parse a file (state, manifest) write it at each
# execution: on tmpfs when there is one, not on a disk (ext4 flushes a file
# truncated and rewritten to disk at close: half the state target's time).
scratch_root=/dev/shm
[[ -d $scratch_root && -w $scratch_root ]] || scratch_root="${TMPDIR:-/tmp}"
ticks="$(getconf CLK_TCK)"

# CPU time (user + system, in clock ticks) of process $1's finished children.
children_cpu() { awk '{print $16 + $17}' "/proc/$1/stat"; }

# Executions of the libFuzzer run whose output is in $1.
executions() {
  local n; n="$(grep -oE 'number_of_executed_units: [0-9]+' "$1" | grep -oE '[0-9]+$' || true)"
  [[ -n $n ]] || n="$(grep -oE '^#[0-9]+' "$1" | tail -1 | tr -d '#' || true)"
  echo "${n:-0}"
}

# The limit of the next libFuzzer run of a target whose total is $1, or
# nothing when its time is spent or its goal reached.
next_limit() {
  if ((goal > 0)); then
    (($1 < goal)) && echo "-runs=$((goal - $1)) -max_total_time=$chunk"
  else
    local left=$((end - SECONDS))
    ((left > 0)) && echo "-max_total_time=$left"
  fi
  return 0
}

# A hang is one that replays over 1 s on its own: under load a slow moment
# also trips -timeout; those are renamed slow-* and counted apart. Each new
# crash or leak is replayed with ASan's full stacks into reports/.
sort_findings() {
  local name="$1" dir="$2" a
  for a in $(grep '^timeout-' "$dir/new-artifacts" || true); do
    if ! "$build/fuzz/${name}_fuzzer" -timeout=1 "$dir/artifacts/$a" 2>&1 | grep -q 'ERROR: libFuzzer: timeout'; then
      mv "$dir/artifacts/$a" "$dir/artifacts/slow-${a#timeout-}"
      sed -i "s/^$a\$/slow-${a#timeout-}/" "$dir/new-artifacts"
    fi
  done
  for a in $(grep -E '^(crash|leak)-' "$dir/new-artifacts" || true); do
    mkdir -p "$dir/reports"
    ASAN_OPTIONS="malloc_context_size=30${asan_given:+:$asan_given}" \
      "$build/fuzz/${name}_fuzzer" "$dir/artifacts/$a" >"$dir/reports/$a.txt" 2>&1 || true
  done
}

run_one() {
  local name="$1" dir="$build/fuzz-work/$1"
  mkdir -p "$dir/corpus" "$dir/artifacts"
  local TMPDIR; TMPDIR="$(mktemp -d "$scratch_root/fleet-fuzz-run.XXXXXX")"
  export TMPDIR
  : >"$dir/run.log"
  local before; before="$(ls "$dir/artifacts" | sort)"
  local start=$SECONDS end=$((SECONDS + seconds)) execs=0 limit n cpu0
  local total; total="$(cat "$dir/total-execs" 2>/dev/null || echo 0)"
  local me=$BASHPID  # this target's shell: its children are the target's runs
  cpu0="$(children_cpu "$me")"
  while limit="$(next_limit "$total")"; [[ -n $limit ]]; do
    # shellcheck disable=SC2086  # $limit: one or two flags
    "$build/fuzz/${name}_fuzzer" $limit "${fuzz_flags[@]}" -artifact_prefix="$dir/artifacts/" \
      "$dir/corpus" "fuzz/corpus/$name" >"$dir/last.log" 2>&1 || true
    cat "$dir/last.log" >>"$dir/run.log"
    n="$(executions "$dir/last.log")"
    execs=$((execs + n)) total=$((total + n))
    echo "$total" >"$dir/total-execs"
    ((n > 0)) || break  # did not start: do not spin
    # A run that wrote no finding ran its time out (--until: a chunk).
    ((goal > 0)) || grep -q 'Test unit written to' "$dir/last.log" || break
  done
  local cpu=$(($(children_cpu "$me") - cpu0))
  local rate=$((execs / (SECONDS > start ? SECONDS - start : 1)))  # per second of wall time
  local cpu_rate=$((cpu > 0 ? execs * ticks / cpu : 0))            # per second of CPU time
  comm -13 <(echo "$before") <(ls "$dir/artifacts" | sort) >"$dir/new-artifacts"
  sort_findings "$name" "$dir"
  rm -rf "$TMPDIR"
  local cov; cov="$(grep -oE 'cov: [0-9]+' "$dir/run.log" | tail -1 | cut -d' ' -f2 || true)"
  count() { grep -c "^$1-" "$dir/new-artifacts" || true; }
  local hangs; hangs="$(count timeout)"
  (($(count slow) == 0)) || hangs="$hangs(+$(count slow)-slow)"
  printf '%s %s %s %s %s %s %s %s %s %s\n' "$name" "$execs" "$total" "${cov:-?}" \
    "$(count crash)" "$hangs" "$(count leak)" "$(count oom)" "$rate" "$cpu_rate" >"$dir/row"
}

running=0
((seconds > 0)) || targets=($(for t in "${targets[@]}"; do if [[ -f $build/fuzz-work/$t/row ]]; then echo "$t"; fi; done))
for t in "${targets[@]}"; do
  ((seconds > 0)) || break  # SECONDS 0: the table of each target's last run
  [[ -x $build/fuzz/${t}_fuzzer ]] || { echo "no target $t" >&2; exit 2; }
  run_one "$t" &
  running=$((running + 1))
  if ((running >= jobs)); then wait -n || true; running=$((running - 1)); fi
done
wait

if ((goal > 0)); then how="until $goal executions in total"; else how="${seconds}s"; fi
((seconds > 0)) || how="0: last runs"
echo "fuzzing: $how per target, $jobs at a time, $(nproc) cores, load $(cut -d' ' -f1 /proc/loadavg), $(date -u +%FT%TZ), $build at $([[ $(optimization) == 0 ]] && echo -O0 || echo -O1)"
printf '%-18s %12s %8s %10s %14s %7s %7s %6s %6s %5s\n' target execs exec/s exec/CPU-s total-execs edges crashes hangs leaks ooms
found=0
for t in "${targets[@]}"; do
  read -r name execs total cov crash hang leak oom rate cpu_rate <"$build/fuzz-work/$t/row"
  printf '%-18s %12s %8s %10s %14s %7s %7s %6s %6s %5s\n' "$name" "$execs" "${rate:-?}" "${cpu_rate:-?}" \
    "$total" "$cov" "$crash" "$hang" "$leak" "$oom"
  hangs_reproduced="${hang%%[(]*}"
  ((crash + hangs_reproduced + leak + oom == 0)) || found=1
done
((found == 0)) || echo "findings: $build/fuzz-work/<target>/artifacts/, reports/ (reproduce: $build/fuzz/<target>_fuzzer FILE)"
exit "$found"
