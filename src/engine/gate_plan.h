// The gate in the plan (issue #47): which deployment changes pass a gate
// before their new spec takes the route, where the new spec is benched, and
// which gates hold a spec they refused.
//
// A change is gated when its deployment declares `promote:` and the plan
// replaces a running serve whose image, model or recipe (command, env,
// options, GPUs) differs from what the state records; a replacement for
// health or a quarantine is not. On a group (one engine across nodes) it is
// not gated, with a warning. Of replicas, the first node's change is gated
// and the others wait for it. The candidate node is the first node (by
// name) that no deployment or gateway declares and where the plan has the
// new spec's image (and model, if any): the gated change waits for their
// staging there. None: in place.
//
// Image removals on the gated node and the candidate wait for the gate: an
// old image is never pruned under a running gate (and not at all if it
// refuses: a failed step's dependents are skipped).
//
// A spec the gate refused (the last "gate" state event of the deployment
// about this spec says refused: going back to a spec refused before holds
// it too) is held: its change becomes a noop with a
// reason and the plan a warning, until the spec changes or `retry` is set
// (`fleet apply --retry-gate`).
#ifndef FLEET_SRC_ENGINE_GATE_PLAN_H_
#define FLEET_SRC_ENGINE_GATE_PLAN_H_

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "manifests/manifest.h"
#include "src/plan.h"

namespace fleet {

// The gate's last word on a deployment, from the "gate" state events.
struct GateOutcome {
  std::string outcome;  // "refused", "promoted"
  std::string spec;     // the spec hash it was about
  std::string run;      // the bench run id
  std::string time;
  std::string why;
};

// Per deployment and spec (GateOutcomeKey): the last "gate" event about it.
std::map<std::string, GateOutcome> LastGateOutcomes(const std::vector<nlohmann::json>& events);
std::string GateOutcomeKey(const std::string& deployment, const std::string& spec);

void MarkGatedChanges(const Manifest& m, const std::map<std::string, GateOutcome>& last, bool retry,
                      Plan* plan);

}  // namespace fleet

#endif  // FLEET_SRC_ENGINE_GATE_PLAN_H_
