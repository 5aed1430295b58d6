// The `restart` key of fleet.yaml: what `fleet watch --heal` may do about a
// serve that went bad.
//
//   defaults:
//     restart: {on: [exit, unhealthy, smoke], backoff: 30s, max_backoff: 10m, limit: 5 in 1h}
//   deployments:
//     qwen38:
//       restart: {on: [exit, smoke], limit: 3 in 30m}   # over the defaults, key by key
//     bench-only:
//       restart: never
//
// A `restart` value is the string `never` or a map of these keys, each
// optional: on (a list of exit, unhealthy, smoke; not empty, no repeats),
// backoff and max_backoff (durations > 0, backoff <= max_backoff), limit
// ("<N> in <duration>", N 1..1000). Errors name file:line:column and what
// was expected; a misspelt word gets the nearest valid one.
#ifndef FLEET_MANIFESTS_RESTART_POLICY_H_
#define FLEET_MANIFESTS_RESTART_POLICY_H_

#include <string>
#include <string_view>

#include "manifests/manifest.h"
#include "manifests/yaml_schema.h"

namespace fleet {

// Reads one `restart` value (`entry`, a key of `defaults` or of a
// deployment; `what` names its owner in messages, "defaults" or
// "deployment 'q'") over `*policy`, which holds what the level above
// resolved to: each key given replaces that field, the others stay;
// `never` sets policy->never. A map under an inherited `never` changes the
// fields but not `never` (a warning says it has no effect). backoff <=
// max_backoff is checked on the result when this level gives either.
// Sets policy->loc to the entry's key. Returns false when anything was
// reported as an error; fields whose value was bad keep the value they had.
bool ReadRestartPolicy(yaml_schema::Reporter* reporter, const yaml_schema::Entry& entry,
                       const std::string& what, RestartPolicy* policy);

// True when `policy` lets a watch round heal a serve for `cause` ("exit",
// "unhealthy" or "smoke"): not never, and `cause` is in policy.on.
bool RestartPolicyHeals(const RestartPolicy& policy, std::string_view cause);

}  // namespace fleet

#endif  // FLEET_MANIFESTS_RESTART_POLICY_H_
