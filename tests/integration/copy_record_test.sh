#!/usr/bin/env bash
# An image copy is recorded before it runs (providers/image, issue 14): fleet
# killed (-9) after the copied image is loaded on the target, while it names
# it, before the step's own state save, still owns the image: the state holds
# image.bb@dgx2, the re-apply plans only the naming of the loaded image
# (LoadedNotNamed) and converges without copying again (a saved plan of
# that naming, applied after the image went, fails saying so), and dropping
# the image with --purge removes it from dgx2. Before the fix the re-apply
# found the copy unrecorded (a note: `fleet state adopt`), converged with it
# out of the state, and --purge left it on the node (tests/faults/kill9.sh).
source "$(dirname "$0")/lib.sh"
source "$ROOT/tests/integration/registry.sh"

registry_start
D=$(image_push fleet/serve v1 2)
start_fleet 2 --insecure-registry "$REGISTRY"
on_node dgx1 "$(node_field dgx1 engine) pull -q $REGISTRY/fleet/serve@$D" >/dev/null || fail "pull on dgx1"
CLI=$(node_field dgx2 engine)
mkrepo --image "bb={\"ref\": \"$REGISTRY/fleet/serve@$D\", \"source\": \"peers\", \"nodes\": [\"dgx1\", \"dgx2\"]}"

# dgx2's engine CLI, first on the node's PATH, holds every `tag` (the naming
# after the load) until the test lets it go.
R2=$(node_root dgx2)
cat >"$R2/bin/$CLI" <<EOF
#!/bin/sh
if [ "\$1" = tag ]; then
  : >/srv/sim/tagging
  while [ ! -e /srv/sim/release ]; do sleep 0.1; done
fi
exec /usr/bin/$CLI "\$@"
EOF
chmod 0755 "$R2/bin/$CLI"

step "apply, killed while the copied image is being named on dgx2"
"$FLEET" -C "$REPO" --no-color apply --auto-approve >"$WORK/apply.log" 2>&1 </dev/null &
pid=$!
for ((i = 0; i < 600; i++)); do
  [[ -e $R2/sim/tagging ]] && break
  kill -0 "$pid" 2>/dev/null || { cat "$WORK/apply.log"; fail "the apply ended before the copy's naming"; }
  sleep 0.1
done
[[ -e $R2/sim/tagging ]] || fail "no tag on dgx2 within 60 s"
kill -9 "$pid"
wait "$pid" 2>/dev/null || true
# The held tag never runs: the image stays loaded without a name, as when
# fleet dies before its `tag` starts. ([p]odman: pkill does not match the
# shell that runs it.)
on_node dgx2 "pkill -u \$(id -u) -f '/srv/bin/[${CLI:0:1}]${CLI:1} tag'" || fail "no held tag on dgx2 to stop"
rm -f "$R2/bin/$CLI"
! grep -q 'image.bb@dgx2: complete' "$WORK/apply.log" || fail "the step finished before the kill"
python3 - "$(state_file)" <<'PY' || fail "image.bb@dgx2 is not recorded as copied after the kill"
import json, sys
recs = {r["address"]: r for r in json.load(open(sys.argv[1]))["resources"]}
a = recs["image.bb@dgx2"]["attributes"]
assert a["via"] == "copy" and a["from"] == "dgx1" and a["image_id"], a
PY

step "a saved plan that names the image fails clearly when the image went meanwhile"
ID=$(python3 -c 'import json,sys; print({r["address"]: r for r in json.load(open(sys.argv[1]))["resources"]}["image.bb@dgx2"]["attributes"]["image_id"])' "$(state_file)")
expect_rc 0 plan --out "$WORK/name.plan"
expect_out "name image"
on_node dgx2 "$CLI rmi $ID" >/dev/null || fail "rmi of the loaded image on dgx2"
expect_rc 1 apply --auto-approve "$WORK/name.plan"
expect_out "is no longer on the node: plan again"
no_crash
# Back to the image loaded without a name, as the kill left it.
on_node dgx1 "$CLI save $ID" | on_node dgx2 "$CLI load" >/dev/null 2>&1 || fail "reloading the image on dgx2"
[[ -z $(on_node dgx2 "$CLI image inspect --format '{{.RepoTags}}' $ID" | tr -d '[]') ]] ||
  fail "the reloaded image has a name on dgx2"

step "the re-apply names the image without copying it again, and converges"
expect_rc 0 plan
expect_out "image.bb@dgx2 will be updated in-place: name image"
expect_out "without fleet's tag"
expect_rc 0 apply --auto-approve
expect_no_out "save | load"
expect_out "$CLI tag"
assert_converged
python3 - "$(state_file)" <<'PY' || fail "image.bb@dgx2 is no longer recorded as fleet's copy"
import json, sys
recs = {r["address"]: r for r in json.load(open(sys.argv[1]))["resources"]}
a = recs["image.bb@dgx2"]["attributes"]
assert a["via"] == "copy" and a["from"] == "dgx1", a
PY

step "dropping the image with --purge removes the copy from dgx2, not dgx1's own"
mkrepo
expect_rc 0 apply --auto-approve --purge
[[ $(on_node dgx2 "$CLI images -q | wc -l") == 0 ]] || fail "dgx2 still holds an image"
ce_exists dgx1 image "$REGISTRY/fleet/serve@$D" || fail "dgx1's own image was removed"
assert_converged
echo PASS
