#!/usr/bin/env bash
# check-code-shape.sh [DIR...]: the code-shape rules of issue 15, checked.
#
# 1. No function longer than 100 lines outside tests. Measured with Universal
#    Ctags (`apt-get install -y universal-ctags`): for every C++ function
#    definition (kind f, lambdas included) ctags reports the line of its
#    signature (`line:`) and of its closing brace (`end:`); its length is
#    end - line, the way issue 15's table counts (Executor::Apply: 221).
#    Skipped: *_test.cc, *_test_util.h, anything under a tests/ folder, and
#    generated code (build*/).
# 2. No attribute read by string key inside providers: in every non-test
#    .cc/.h under providers/, a `.value("` or a `["<letter or _>` is an
#    offender. Exempt, because they are the JSON boundary and nothing else:
#    - *_json.cc/.h (and model's *_attrs.cc/.h, its name for the same file),
#      where each provider's typed structs have their one pair of JSON
#      conversions (the generic DesiredResource/ActualResource/PlanChange/
#      ResourceRecord JSON is read and written there);
#    - the body of a function named to_json, from_json, *ToJson or *FromJson
#      (the line ranges come from ctags), wherever it lives: the conversion
#      pair of a struct read from a probe's JSON output (HubProbe, Listing);
#    - `kv["key"]`: `kv` is, throughout, the std::map that ParseKeyValues
#      (src/provider.h) makes of a probe's key=value output lines; probe
#      output, not attributes, and a missing key reads as "" on purpose.
#    A grep, not a parser: any other map indexed by a literal key (m["k"])
#    counts too; write m.at("k") or m.find("k") there.
# 3. (No provider includes another provider's header: the build checks
#    that now, providers/check_boundary.py in each provider library.)
# 4. The engine does not compare resource types by name: it asks the
#    provider (Provider::IsNodeItself, PowerOf, UnplannedCost, TakesDown,
#    and RoleOf for the commands built around serves, gateways or images).
#    A non-test file under src/engine/ with `.type == "..."`, `.type !=
#    "..."` (or `->type`, or the literal first) is an offender. Checked when
#    src/ or src/engine/ is among the DIRs.
# 5. Time goes through the seam (src/clock.h): production code reads the
#    clocks and sleeps through a Clock handed down (StepContext::clock, the
#    executor's, the heal round's), never with sleep_for, usleep, a
#    `...::now()`, time(nullptr) or a condition variable's or future's
#    wait_for/wait_until of its own (Clock::WaitOn, WaitOnClock: a deadline
#    there runs on the machine's clock whatever Clock was handed down; a
#    wait_for of zero only asks whether a future is ready, and passes), so
#    that tests can run it on a FakeClock. The uses not yet moved are listed
#    in scripts/clock-outside-seam.txt, one "FILE: TEXT" a line (a list that
#    only shrinks, as in 3). src/clock.cc is the seam itself and
#    src/fake_clock.h its stand-in for tests. Not checked:
#    src/probe/, the node-side fleet-probe: a program of its own that a
#    node builds from its one C++17 file with no fleet library (so it
#    cannot link the seam), which times only itself on the node for its
#    report (elapsed_ns), and which no controller test runs on a clock.
#    Checked when no DIR is given (the whole tree).

# With no DIR, checks src/ providers/ manifests/ state/ of the repository.
# Prints one line per offender and exits 1 when there is any, 0 otherwise.
# FLEET_SHAPE_MAX_LINES overrides the limit (default 100);
# FLEET_SHAPE_SKIP is a regex of paths to leave out (e.g. providers/model/).
set -euo pipefail

cd "$(dirname "$0")/.."
max_lines="${FLEET_SHAPE_MAX_LINES:-100}"
skip="${FLEET_SHAPE_SKIP:-^$}"
whole_tree=0
if [ "$#" -eq 0 ]; then
  set -- src providers manifests state
  whole_tree=1
fi
if ! command -v ctags >/dev/null || ! ctags --version | grep -q 'Universal Ctags'; then
  echo "check-code-shape: needs Universal Ctags (apt-get install -y universal-ctags)" >&2
  exit 2
fi

sources() {
  find "$@" -type f \( -name '*.cc' -o -name '*.h' -o -name '*.cpp' \) \
    ! -name '*_test.cc' ! -name '*_test_util.h' ! -path '*/tests/*' ! -path 'build*/*' ! -path '*/build/*' |
    grep -Ev "$skip" | sort
}

offenders=0
# against_list FILE WHY GONE: a list that may only shrink. Each line of
# stdin (what the code makes) that FILE does not list is an offender (said
# with WHY), and so is each line FILE lists that the code no longer makes
# ("no longer GONE": the list is to be cut).
against_list() {
  local allowed=$1 why=$2 gone_word=$3 made listed new_ones gone
  made=$(cat)
  listed=$(grep -v -e '^#' -e '^$' "$allowed" | sort || true)
  new_ones=$(comm -23 <(echo "$made") <(echo "$listed") | grep -v '^$' || true)
  gone=$(comm -13 <(echo "$made") <(echo "$listed") | grep -v '^$' || true)
  if [ -n "$new_ones" ]; then
    while IFS= read -r l; do echo "$l   <- $why"; done <<<"$new_ones"
    offenders=$((offenders + $(echo "$new_ones" | wc -l)))
  fi
  if [ -n "$gone" ]; then
    while IFS= read -r l; do echo "$l   <- no longer $gone_word: remove it from $allowed"; done <<<"$gone"
    offenders=$((offenders + $(echo "$gone" | wc -l)))
  fi
}

# 1. Long functions.
long=$(sources "$@" |
  ctags --output-format=u-ctags --fields=+ne --kinds-c++=f -L - -o - 2>/dev/null |
  awk -F'\t' -v max="$max_lines" '
    {
      line = 0; end = 0; scope = ""
      for (i = 4; i <= NF; i++) {
        if ($i ~ /^line:/) line = substr($i, 6)
        else if ($i ~ /^end:/) end = substr($i, 5)
        else if ($i ~ /^(class|namespace|function|struct):/) { scope = $i; sub(/^[a-z]+:/, "", scope) }
      }
      if (line > 0 && end > 0 && end - line > max) {
        name = (scope != "" ? scope "::" : "") $1
        printf "%s:%d: function %s is %d lines (over %d)\n", $2, line, name, end - line, max
      }
    }' | sort -t: -k1,1 -k2,2n)
if [ -n "$long" ]; then
  echo "$long"
  offenders=$((offenders + $(echo "$long" | wc -l)))
fi

# 2. Attributes read by string key inside providers.
provider_dirs=()
for d in "$@"; do
  case "$d" in providers | providers/* | ./providers | ./providers/*) provider_dirs+=("$d") ;; esac
done
if [ "${#provider_dirs[@]}" -gt 0 ]; then
  files=$(sources "${provider_dirs[@]}" | grep -Ev '_(json|attrs)\.(cc|h)$' || true)
  # "file start end" of every JSON conversion function in those files.
  conversions=$(echo "$files" | grep -v '^$' |
    ctags --output-format=u-ctags --fields=+ne --kinds-c++=f -L - -o - 2>/dev/null |
    awk -F'\t' '$1 ~ /^(to_json|from_json|[A-Za-z_]*ToJson|[A-Za-z_]*FromJson)$/ {
      line = 0; end = 0
      for (i = 4; i <= NF; i++) {
        if ($i ~ /^line:/) line = substr($i, 6)
        else if ($i ~ /^end:/) end = substr($i, 5)
      }
      if (line > 0 && end > 0) print $2, line, end
    }')
  keyed=$(echo "$files" | grep -v '^$' |
    xargs -r grep -nE -e '\.value\("' -e '\["[A-Za-z_]' /dev/null |
    grep -Ev '^[^:]*:[0-9]+:.*(^|[^A-Za-z0-9_])kv\["' |
    awk -v ranges="$conversions" '
      BEGIN {
        n = split(ranges, rows, "\n")
        for (i = 1; i <= n; i++) if (split(rows[i], f, " ") == 3) {
          k++; rf[k] = f[1]; rs[k] = f[2]; re[k] = f[3]
        }
      }
      {
        split($0, p, ":"); inside = 0
        for (i = 1; i <= k; i++) if (p[1] == rf[i] && p[2] + 0 >= rs[i] && p[2] + 0 <= re[i]) inside = 1
        if (!inside) print $0 "   <- attribute read by string key"
      }' || true)
  if [ -n "$keyed" ]; then
    echo "$keyed"
    offenders=$((offenders + $(echo "$keyed" | wc -l)))
  fi
fi

# 4. Resource-type comparisons in the engine.
engine_type_comparisons() {
  sources src/engine |
    xargs -r grep -HE '(\.|->)type *(==|!=) *"|"[a-z_]+" *(==|!=) *[A-Za-z_]+(\.|->)type([^A-Za-z_(]|$)' /dev/null |
    sed -E 's/^([^:]+):[[:space:]]*/\1: /' | sort
}
for d in "$@"; do
  case "$d" in src | ./src | src/ | ./src/ | src/engine | ./src/engine | src/engine/ | ./src/engine/) ;; *) continue ;; esac
  compared=$(engine_type_comparisons || true)
  if [ -n "$compared" ]; then
    while IFS= read -r l; do echo "$l   <- the engine names a resource type (ask the provider: a hook in src/provider.h)"; done <<<"$compared"
    offenders=$((offenders + $(echo "$compared" | wc -l)))
  fi
  break
done

# 5. Time outside the seam.
clock_outside_seam() {
  sources src providers manifests state | grep -vE '^src/clock\.cc$|^src/fake_clock\.h$|^src/probe/' |
    xargs -r grep -HE 'sleep_for *\(|\busleep *\(|\bnanosleep *\(|[A-Za-z_]+::now *\(\)|\btime *\( *(nullptr|NULL|0) *\)|\bwait_(for|until) *\(' /dev/null |
    grep -vE '^[^:]+:[[:space:]]*//' | grep -vE 'wait_for *\( *std::chrono::[a-z]+::zero\(\) *\)' |
    sed -E 's/^([^:]+):[[:space:]]*/\1: /' | sort
}
if [ "$whole_tree" -eq 1 ]; then
  against_list scripts/clock-outside-seam.txt "reads the clock or sleeps outside the seam (use a Clock: src/clock.h)" "made" < <(clock_outside_seam)
fi

if [ "$offenders" -gt 0 ]; then
  echo "check-code-shape: $offenders offender(s)" >&2
  exit 1
fi
echo "check-code-shape: ok"
