#!/usr/bin/env bash
# prometheus_rules_test: examples/prometheus stays loadable and true to what
# `fleet watch --metrics-listen` exports: the config and rules pass promtool,
# the alert unit tests pass, the dashboard is JSON, every metric the rules,
# their tests and the dashboard name is an exported family (a renamed metric
# fails here), and every alert has a unit test. Skipped (77) without promtool.
# FLEET_PROM_DIR overrides the directory checked (to try a changed copy).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dir="${FLEET_PROM_DIR:-$root/examples/prometheus}"
if ! command -v promtool >/dev/null; then
  echo "prometheus_rules_test: SKIP (needs promtool: apt-get install -y prometheus)"
  exit 77
fi
promtool check config "$dir/prometheus.yml"   # also loads fleet-alerts.yml, relative to it
promtool check rules "$dir/fleet-alerts.yml"
promtool test rules "$dir/fleet-alerts_test.yml"

python3 - "$dir" "$root" <<'PY'
import json, re, sys
d, root = sys.argv[1], sys.argv[2]
# The families fleet watch exports: every "fleet_..." name in the exporter's
# source (a renamed metric there fails this test until the rules follow),
# and Prometheus's own `up`.
FAMILIES = set(re.findall(r'"(fleet_[a-z_]+)"', open(f"{root}/src/engine/watch_metrics.cc").read())) | {"up"}
KEYWORDS = {"and", "or", "unless", "bool", "offset", "inf", "nan"}

def metrics(expr):
    """The metric names a PromQL expression (or label_values(m, label)) selects."""
    expr = re.sub(r"label_values\((.*),\s*\w+\s*\)", r"\1", expr)
    expr = re.sub(r'"(?:\\.|[^"\\])*"|\'(?:\\.|[^\'\\])*\'|`[^`]*`', "", expr)  # strings
    expr = re.sub(r"\{[^}]*\}|\[[^\]]*\]", "", expr)        # matchers, ranges
    expr = re.sub(r"\b(on|ignoring|by|without|group_left|group_right)\s*\([^)]*\)", "", expr)
    expr = re.sub(r"\$\{[^}]*\}|\$\w+", "", expr)            # Grafana variables
    found = set()
    for m in re.finditer(r"(?<![\w.:])[A-Za-z_:][\w:]*", expr):
        if expr[m.end():].lstrip().startswith("(") or m.group().lower() in KEYWORDS:
            continue                                         # a function or an operator
        found.add(m.group())
    return found

errors = []
def check(where, expr):
    names = metrics(expr)
    if not names:
        errors.append(f"{where}: no metric found in {expr!r}")
    for n in sorted(names - FAMILIES):
        errors.append(f"{where}: {n} is not a metric fleet watch exports (in {expr!r})")

rules = open(f"{d}/fleet-alerts.yml").read()
alerts = re.findall(r"^\s*-\s*alert:\s*(\S+)\s*$", rules, re.M)
for n, line in enumerate(rules.splitlines(), 1):
    m = re.match(r"\s*expr:\s*(.*)$", line)
    if m:
        if m.group(1).strip()[:1] in ("|", ">", ""):
            errors.append(f"fleet-alerts.yml:{n}: keep expr on one line (this test reads it)")
        else:
            check(f"fleet-alerts.yml:{n}", m.group(1).strip().strip("'\""))

tests = open(f"{d}/fleet-alerts_test.yml").read()
for n, line in enumerate(tests.splitlines(), 1):
    m = re.match(r"\s*-?\s*series:\s*'([^']*)'", line)
    if m:
        check(f"fleet-alerts_test.yml:{n}", m.group(1))
tested = set(re.findall(r"^\s*-?\s*alertname:\s*(\S+)\s*$", tests, re.M))
for a in alerts:
    if a not in tested:
        errors.append(f"fleet-alerts_test.yml: no test case for alert {a}")
if not alerts:
    errors.append("fleet-alerts.yml: no alerts found")

try:
    dash = json.load(open(f"{d}/grafana-dashboard.json"))
except ValueError as e:
    sys.exit(f"FAIL grafana-dashboard.json: not JSON: {e}")
queries = 0
def walk(v, path):
    global queries
    if isinstance(v, dict):
        for k, x in v.items():
            if k in ("expr", "query", "definition") and isinstance(x, str) and x.strip():
                queries += 1
                check(f"grafana-dashboard.json {path}.{k}", x)
            else:
                walk(x, f"{path}.{k}")
    elif isinstance(v, list):
        for i, x in enumerate(v):
            walk(x, f"{path}[{i}]")
walk(dash, "$")
if queries == 0:
    errors.append("grafana-dashboard.json: no queries found")

for e in errors:
    print("FAIL", e)
sys.exit(1 if errors else 0)
PY
echo "prometheus_rules_test: PASS"
