#!/usr/bin/env bash
# Coverage-guided fuzzing of every parser fleet feeds untrusted bytes to.
#
#   bench/fuzz.sh SECONDS [JOBS] [TARGET...]
#   bench/fuzz.sh 0          # the table of every target's last run again
#
# Builds the fuzz build (build-fuzz/, clang-16, -Dfuzz=true: libFuzzer with
# ASan and UBSan), then runs each target (all of fuzz/ by default) for
# SECONDS, JOBS targets at a time (default 1), and prints a table: target,
# executions (this run, its executions per second of wall time, and in
# total over every run kept in build-fuzz/fuzz-work/), coverage (edges:
# libFuzzer's `cov:`), crashes, hangs (an input that replays in > 1 s on
# its own; "(+N-slow)": inputs that tripped the 1 s limit only under load),
# leaks, out-of-memory (> 2 GB).
# A finding does not end the run (the target is restarted); the inputs are
# kept as build-fuzz/fuzz-work/<target>/artifacts/{crash,timeout,leak,oom}-*.
# Each target's corpus grows in build-fuzz/fuzz-work/<target>/corpus across
# runs, seeded from fuzz/corpus/<target>/. Exit status 1 when anything was
# found.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:?usage: bench/fuzz.sh SECONDS [JOBS] [TARGET...]}"
jobs="${2:-1}"
shift $(($# >= 2 ? 2 : 1))
build=build-fuzz
# Optimized (meson.build then compiles at -O1 under the sanitizers, as
# OSS-Fuzz builds): at -O0 the targets ran 2 to 16 times slower (README).
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

# One target for `seconds` in all. libFuzzer stops at its first finding, so
# it is restarted (the corpus kept) until the time is spent; each finding is
# kept as build-fuzz/fuzz-work/<target>/artifacts/{crash,timeout,leak,oom}-*.
# The targets that parse a file (state, manifest) write it at each
# execution: on tmpfs when there is one, not on a disk (ext4 flushes a file
# truncated and rewritten to disk at close: half the state target's time).
scratch_root=/dev/shm
[[ -d $scratch_root && -w $scratch_root ]] || scratch_root="${TMPDIR:-/tmp}"

run_one() {
  local name="$1" dir="$build/fuzz-work/$1"
  mkdir -p "$dir/corpus" "$dir/artifacts"
  local TMPDIR; TMPDIR="$(mktemp -d "$scratch_root/fleet-fuzz-run.XXXXXX")"
  export TMPDIR
  : >"$dir/run.log"
  local before; before="$(ls "$dir/artifacts" | sort)"
  local start=$SECONDS end=$((SECONDS + seconds)) execs=0 left
  while left=$((end - SECONDS)); ((left > 0)); do
    "$build/fuzz/${name}_fuzzer" -max_total_time="$left" -timeout=1 -rss_limit_mb=2048 \
      -print_final_stats=1 -print_funcs=0 -artifact_prefix="$dir/artifacts/" \
      "$dir/corpus" "fuzz/corpus/$name" >"$dir/last.log" 2>&1 || true
    cat "$dir/last.log" >>"$dir/run.log"
    local n; n="$(grep -oE 'number_of_executed_units: [0-9]+' "$dir/last.log" | grep -oE '[0-9]+$' || true)"
    [[ -n $n ]] || n="$(grep -oE '^#[0-9]+' "$dir/last.log" | tail -1 | tr -d '#')"
    execs=$((execs + ${n:-0}))
    grep -q 'Test unit written to' "$dir/last.log" || break  # ran its time out
  done
  local rate=$((execs / (SECONDS > start ? SECONDS - start : 1)))  # per second of wall time
  comm -13 <(echo "$before") <(ls "$dir/artifacts" | sort) >"$dir/new-artifacts"
  # A hang is one that replays over 1 s on its own: under load a slow
  # moment also trips -timeout; those are renamed slow-* and counted apart.
  local a
  for a in $(grep '^timeout-' "$dir/new-artifacts" || true); do
    if ! "$build/fuzz/${name}_fuzzer" -timeout=1 "$dir/artifacts/$a" 2>&1 | grep -q 'ERROR: libFuzzer: timeout'; then
      mv "$dir/artifacts/$a" "$dir/artifacts/slow-${a#timeout-}"
      sed -i "s/^$a\$/slow-${a#timeout-}/" "$dir/new-artifacts"
    fi
  done
  rm -rf "$TMPDIR"
  local total; total=$(( $(cat "$dir/total-execs" 2>/dev/null || echo 0) + execs ))
  echo "$total" >"$dir/total-execs"
  local cov; cov="$(grep -oE 'cov: [0-9]+' "$dir/run.log" | tail -1 | cut -d' ' -f2)"
  count() { grep -c "^$1-" "$dir/new-artifacts" || true; }
  local hangs; hangs="$(count timeout)"
  (($(count slow) == 0)) || hangs="$hangs(+$(count slow)-slow)"
  printf '%s %s %s %s %s %s %s %s %s\n' "$name" "$execs" "$total" "${cov:-?}" \
    "$(count crash)" "$hangs" "$(count leak)" "$(count oom)" "$rate" >"$dir/row"
}

running=0
((seconds > 0)) || targets=($(for t in "${targets[@]}"; do [[ -f $build/fuzz-work/$t/row ]] && echo "$t"; done))
for t in "${targets[@]}"; do
  ((seconds > 0)) || break  # SECONDS 0: the table of each target's last run
  [[ -x $build/fuzz/${t}_fuzzer ]] || { echo "no target $t" >&2; exit 2; }
  run_one "$t" &
  running=$((running + 1))
  if ((running >= jobs)); then wait -n || true; running=$((running - 1)); fi
done
wait

echo "fuzzing: ${seconds}s per target (0: last runs), $jobs at a time, $(nproc) cores, load $(cut -d' ' -f1 /proc/loadavg), $(date -u +%FT%TZ), $build at $([[ $(optimization) == 0 ]] && echo -O0 || echo -O1)"
printf '%-18s %12s %8s %14s %7s %7s %6s %6s %5s\n' target execs exec/s total-execs edges crashes hangs leaks ooms
found=0
for t in "${targets[@]}"; do
  read -r name execs total cov crash hang leak oom rate <"$build/fuzz-work/$t/row"
  printf '%-18s %12s %8s %14s %7s %7s %6s %6s %5s\n' "$name" "$execs" "${rate:-?}" "$total" "$cov" "$crash" "$hang" "$leak" "$oom"
  hangs_reproduced="${hang%%[(]*}"
  ((crash + hangs_reproduced + leak + oom == 0)) || found=1
done
((found == 0)) || echo "findings: $build/fuzz-work/<target>/artifacts/ (reproduce: $build/fuzz/<target>_fuzzer FILE)"
exit "$found"
