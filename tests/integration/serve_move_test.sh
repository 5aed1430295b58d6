#!/usr/bin/env bash
# One serve per node: moving dgx1 from deployment A to deployment B (other
# port, other image tag) stops A there before B starts. A poller lists the
# node's fleet serves through the engine during the whole apply and must never
# see both running. A serves on for 5 s after SIGTERM (as an engine draining
# its requests does), so a B started in parallel with A's removal would
# overlap for seconds. (It ignored SIGTERM once: each stop then waited out
# the engine's 30 s stop timeout, for no more overlap than 5 s show.)
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/registry.sh"

PA=$(free_port)
PB=$(free_port)
registry_start
R=$REGISTRY
D=$(image_push fleet/move v1)
start_fleet 1 --insecure-registry "$R"
mkdir -p "$REPO/recipes"
serve() {  # serve FILE: a recipe serving /v1/models on {port}; exits 5 s after TERM
  cat >"$REPO/recipes/$1" <<'TOML'
model = ""
args = ["sh", "-c", "trap 'busybox sleep 5; exit 0' TERM; busybox mkdir -p /www/v1 && echo ok > /www/v1/models && busybox httpd -f -p {port} -h /www & while :; do busybox sleep 1; done"]
TOML
}
serve a.toml
serve b.toml
IMG="bb={\"ref\": \"$R/fleet/move@$D\", \"source\": \"registry\"}"
dep() { printf '%s={"recipe": "recipes/%s.toml", "nodes": ["dgx1"], "image": "bb", "port": %s, "health": {"path": "/v1/models", "timeout": "30s"}}' "$1" "$1" "$2"; }

step "A serves on dgx1"
mkrepo --image "$IMG" --deployment "$(dep a "$PA")"
expect_rc 0 apply --auto-approve
assert_converged

step "the manifests give dgx1 to B: A is stopped first"
mkrepo --image "$IMG" --deployment "$(dep b "$PB")"
expect_rc 2 plan --detailed-exitcode
expect_out "one serve per node: fleet-a runs on dgx1"
cli=$(node_field dgx1 engine)
: >"$WORK/seen"
(
  while [[ ! -e $WORK/stop-polling ]]; do
    on_node dgx1 "$cli ps --filter label=fleet.deployment --format '{{.Names}}' | sort | tr '\n' ' '" \
      >>"$WORK/seen" 2>/dev/null && echo >>"$WORK/seen"
  done
) &
POLLER=$!
BG_PIDS+=("$POLLER")  # a failed step must not leave it polling
# (podman's ps waits for a container's lock while it stops: the polls during
# A's stop may only come back after it; the first one sees A.)
for _ in $(seq 100); do grep -q fleet-a "$WORK/seen" && break; sleep 0.1; done
expect_rc 0 apply --auto-approve
touch "$WORK/stop-polling"
wait "$POLLER"
grep -q "fleet-a" "$WORK/seen" || fail "the poller never saw A (it saw: $(sort -u "$WORK/seen" | tr '\n' '|'))"
grep -q "fleet-b" "$WORK/seen" || fail "the poller never saw B"
! grep -q "fleet-a fleet-b" "$WORK/seen" || fail "A and B ran together on dgx1: $(grep -c 'fleet-a fleet-b' "$WORK/seen") polls"
echo "polls during apply: $(wc -l <"$WORK/seen"), distinct: $(sort -u "$WORK/seen" | tr '\n' '|')"
[[ $(curl -s "http://127.0.0.1:$PB/v1/models") == ok ]] || fail "B does not serve"
assert_converged
no_crash
echo PASS
