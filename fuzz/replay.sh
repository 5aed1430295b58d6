#!/usr/bin/env bash
# fuzz_replay_test: when clang-16 is installed, builds the fuzz build
# (-Dfuzz=true, ASan + UBSan + libFuzzer) aside, replays every target's seed
# corpus (fuzz/corpus/<target>/), then fuzzes each target briefly
# (FUZZ_SECONDS, default 4) from those seeds. Any crash, sanitizer report,
# leak or hang (> FUZZ_TIMEOUT s, default 10: CI shares its cores) fails it.
# Without clang-16 it is skipped (exit 77). The repository is never written:
# new inputs and artifacts go to a temporary folder.
set -euo pipefail
src="$(cd "$(dirname "$0")/.." && pwd)"
build="${FUZZ_BUILD_DIR:-$src/build-fuzz}"
seconds="${FUZZ_SECONDS:-4}"
timeout="${FUZZ_TIMEOUT:-10}"
if ! command -v clang++-16 >/dev/null || ! command -v clang-16 >/dev/null; then
  echo "SKIP: clang-16 is not installed (scripts/install-deps.sh installs it)"
  exit 77
fi
if [[ ! -f "$build/build.ninja" ]]; then
  # -O0, no debug info, unity: the quickest build to compile, enough for a
  # short run. Unity (8 sources a translation unit) parses json, yaml-cpp and
  # the standard headers once for 8 files, not 8 times: 388 CPU-s instead of
  # 675 here (2026-12-02, 2 cores), as scripts/build.sh's.
  CC=clang-16 CXX=clang++-16 meson setup "$build" "$src" -Dfuzz=true -Doptimization=0 \
    -Ddebug=false -Dunity=on -Dunity_size=8 >/dev/null
fi
# At nice 19: tests/run-all.sh runs this beside the integration tests,
# whose timeouts matter more than this build's speed (FUZZ_BUILD_NICE=0 to
# build at full priority). The runs below are not niced: their -timeout must not fire
# because other tests had the cores.
# In a session of its own, whose scheduler autogroup is niced too: with
# autogroups (on by default in Debian's kernel) nice only orders processes
# inside one group, and every SSH session of the simulated nodes is a group
# of its own, so a build niced only inside its group took as much CPU as
# they did (a clean clone's .ci/run: image_test 235 s beside it, 99 s
# without). Writing /proc/self/autogroup needs root; without it, plain nice.
nice_n=${FUZZ_BUILD_NICE:-19}
setsid -w bash -c 'echo "$1" >/proc/self/autogroup 2>/dev/null; exec nice -n "$1" ninja -C "$2" fuzzers' \
  fuzz-build "$nice_n" "$build" >/dev/null

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
failed=0
for bin in "$build"/fuzz/*_fuzzer; do
  name="$(basename "$bin" _fuzzer)"
  seeds="$src/fuzz/corpus/$name"
  if [[ ! -d "$seeds" ]] || [[ -z "$(ls -A "$seeds")" ]]; then
    echo "FAIL $name: no seed corpus in fuzz/corpus/$name"
    failed=1
    continue
  fi
  mkdir -p "$work/$name/new" "$work/$name/artifacts"
  log="$work/$name/log"
  if ! "$bin" -runs=0 -timeout="$timeout" -artifact_prefix="$work/$name/artifacts/" \
      "$seeds" >"$log" 2>&1; then
    echo "FAIL $name: replaying fuzz/corpus/$name"; tail -40 "$log"; failed=1; continue
  fi
  # bench/fuzz.sh's throughput settings (more executions in the same time);
  # the seeds above were replayed with ASan's full stacks.
  if ! ASAN_OPTIONS="malloc_context_size=2${ASAN_OPTIONS:+:$ASAN_OPTIONS}" "$bin" -seed=1 \
      -max_total_time="$seconds" -timeout="$timeout" -rss_limit_mb=2048 \
      -entropic_feature_frequency_threshold=32 -entropic_number_of_rarest_features=50 \
      -artifact_prefix="$work/$name/artifacts/" "$work/$name/new" "$seeds" >"$log" 2>&1; then
    echo "FAIL $name: fuzzing ${seconds}s found:"; tail -40 "$log"; failed=1
    for a in "$work/$name/artifacts"/*; do
      [[ -f "$a" ]] && { echo "--- $(basename "$a") (base64):"; base64 -w0 "$a" | head -c 2000; echo; }
    done
    continue
  fi
  execs="$(grep -oE '^#[0-9]+' "$log" | tail -1 | tr -d '#' || true)"
  cov="$(grep -oE 'cov: [0-9]+' "$log" | tail -1 | cut -d' ' -f2 || true)"
  echo "ok   $name: $(ls "$seeds" | wc -l) seeds replayed, ${execs:-0} execs in ${seconds}s, ${cov:-?} edges"
done
exit "$failed"
