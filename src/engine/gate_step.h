// The gate's step in apply (issue #47): a gated deployment change
// (PlanChange::gate, set by src/engine/gate_plan.h) is run here instead of
// by the deployment provider alone.
//
// Beside (gate.candidate names a free node F; the serve is on N):
//   1. no good run of the deployment yet: the serving old spec on N is
//      benched first and marked good (the baseline);
//   2. the new spec starts on F (the provider's own start: image by digest,
//      health, smoke checks), and the profile and quality set run against it;
//   3. DecideGate (gate_decision.h) against the last good run;
//   4. refused: the candidate is removed, nothing else changes, the run is
//      kept ("gate refused") with a "gate" event that holds the spec, and
//      the step fails with the comparison table;
//   5. promoted: the gateways send the model to F, N is replaced in place
//      (the provider's step), the gateways send it back to N, the candidate
//      goes; the run is kept ("gate passed") and marked good.
// In place (no free node): N is replaced with the old container kept aside,
// stopped; the new spec is benched there; refused, the old container is put
// back and started; promoted, it is removed.
#ifndef FLEET_SRC_ENGINE_GATE_STEP_H_
#define FLEET_SRC_ENGINE_GATE_STEP_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "manifests/manifest.h"
#include "src/engine/node_connections.h"
#include "src/plan.h"
#include "src/provider.h"
#include "state/state_store.h"

namespace fleet {

struct GateDeps {
  const Manifest* manifest = nullptr;
  const std::vector<std::unique_ptr<Provider>>* providers = nullptr;
  NodeConnections* connections = nullptr;
  StateStore* store = nullptr;
  std::string root;     // the manifests repo: reports/ go there
  std::string version;  // fleet's, recorded with each run
};

// Runs gated change `c` (its step's context `ctx`, on the serve's node).
// Returns what the provider's step would: the deployment's new record.
Result<nlohmann::json> RunGatedStep(const GateDeps& deps, const PlanChange& c,
                                    const StepContext& ctx);

}  // namespace fleet

#endif  // FLEET_SRC_ENGINE_GATE_STEP_H_
