// `fleet watch --heal`: after a round's plan and smoke checks, brings back
// the recorded serves that died, hung or garble, as their restart policy
// allows (heal_policy.h), with the spec their state record holds
// (providers/deployment/serve_heal.h). It takes the state lock as apply
// does, and never runs beside an apply that holds it.
#ifndef FLEET_SRC_ENGINE_HEAL_ROUND_H_
#define FLEET_SRC_ENGINE_HEAL_ROUND_H_

#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "manifests/manifest.h"
#include "providers/deployment/smoke_check.h"
#include "src/engine/node_connections.h"
#include "src/engine/planner.h"
#include "state/state_store.h"

namespace fleet {

struct HealRoundInput {
  const Manifest* manifest = nullptr;
  NodeConnections* connections = nullptr;
  StateStore* store = nullptr;
  const ProbeResult* probed = nullptr;               // the round's plan probe
  const std::vector<SmokeResult>* checks = nullptr;  // the round's smoke checks
  int64_t lock_timeout_ms = 0;                       // 0: one try
  std::function<void(const std::string&)> progress;  // may be empty
};

// Keeps, between rounds, how many rounds in a row each serve's health URL
// failed (health.grace); the rest lives in the state (HealLedger).
class Healer {
 public:
  // One round: decides for every serve the state records and the manifests
  // still declare on that node, and acts. Returns the round's events, each
  // one JSON object: {"event": "heal"|"heal_wait"|"quarantine", "time",
  // "address", "deployment", "node", "reason", "attempt", "outcome",
  // "duration_s", "detail"}. They are also appended to the store's history.
  std::vector<nlohmann::json> Round(const HealRoundInput& in);

 private:
  std::map<std::string, int> unhealthy_rounds_;
  // Since when (unix seconds) each serve's health probe has timed out while
  // its container runs, in every round since: busy (health.busy_grace).
  std::map<std::string, int64_t> busy_since_;
};

}  // namespace fleet

#endif  // FLEET_SRC_ENGINE_HEAL_ROUND_H_
