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
#    offender. Exempt: *_json.cc/.h, where each provider's typed structs have
#    their one pair of JSON conversions (the boundary where the generic
#    DesiredResource/ActualResource/PlanChange/ResourceRecord JSON is read
#    and written). A grep, not a parser: a map indexed by a literal key
#    (m["k"]) counts too; write m.at("k") or m.find("k") there.

# With no DIR, checks src/ providers/ manifests/ state/ of the repository.
# Prints one line per offender and exits 1 when there is any, 0 otherwise.
# FLEET_SHAPE_MAX_LINES overrides the limit (default 100);
# FLEET_SHAPE_SKIP is a regex of paths to leave out (e.g. providers/model/).
set -euo pipefail

cd "$(dirname "$0")/.."
max_lines="${FLEET_SHAPE_MAX_LINES:-100}"
skip="${FLEET_SHAPE_SKIP:-^$}"
if [ "$#" -eq 0 ]; then
  set -- src providers manifests state
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
  keyed=$(sources "${provider_dirs[@]}" | grep -v '_json\.\(cc\|h\)$' |
    xargs -r grep -nE -e '\.value\("' -e '\["[A-Za-z_]' /dev/null |
    sed 's/$/   <- attribute read by string key/' || true)
  if [ -n "$keyed" ]; then
    echo "$keyed"
    offenders=$((offenders + $(echo "$keyed" | wc -l)))
  fi
fi

if [ "$offenders" -gt 0 ]; then
  echo "check-code-shape: $offenders offender(s)" >&2
  exit 1
fi
echo "check-code-shape: ok"
