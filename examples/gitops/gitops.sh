#!/usr/bin/env bash
# The GitOps loop for a fleet manifests repo, one stage per call; the CI
# workflow (.github/workflows/fleet.yml) calls it, and it runs the same way
# on a laptop:
#
#   gitops.sh validate        manifests + recipes, no network
#   gitops.sh plan            plan against the shared state; saves plan/plan.json
#                             and plan/summary.md (the pull-request comment);
#                             exit 0 no changes, 2 changes, 1 error
#   gitops.sh apply           apply exactly plan/plan.json (refused when the
#                             state moved or the manifests changed since)
#   gitops.sh drift           plan --detailed-exitcode: exit 2 means the fleet
#                             drifted from the manifests (alarm)
#
# Environment: FLEET (the binary, default `fleet`), FLEET_REPO (the manifests
# repo, default .), FLEET_LOCK_TIMEOUT (default 5m: a CI job queued behind an
# operator waits instead of failing), and what the manifests name: the
# state's conn_env (FLEET_STATE_PG), the power switch's token_env, the SSH key.
set -euo pipefail
FLEET=${FLEET:-fleet}
REPO=${FLEET_REPO:-.}
OUT=${FLEET_PLAN_DIR:-plan}
WAIT=${FLEET_LOCK_TIMEOUT:-5m}
fleet() { "$FLEET" -C "$REPO" --no-color "$@"; }

case ${1:-} in
  validate) fleet validate ;;
  plan)
    mkdir -p "$OUT"
    rc=0
    fleet plan --lock-timeout "$WAIT" -out "$OUT/plan.json" --markdown "$OUT/summary.md" \
      --detailed-exitcode || rc=$?
    exit $rc
    ;;
  apply)
    [[ -f $OUT/plan.json ]] || { echo "gitops: no $OUT/plan.json: run the plan stage first" >&2; exit 1; }
    fleet apply --lock-timeout "$WAIT" "$OUT/plan.json"
    ;;
  drift)
    rc=0
    fleet plan --lock-timeout "$WAIT" --detailed-exitcode >"${OUT}-drift.txt" || rc=$?
    cat "${OUT}-drift.txt"
    ((rc == 2)) && echo "gitops: the fleet drifted from the manifests (see above)" >&2
    exit $rc
    ;;
  *) sed -n '2,20p' "$0" >&2; exit 2 ;;
esac
