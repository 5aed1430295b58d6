// `fleet watch --heal`: idle off (issue #46). Each round reads each
// gateway's per-model request counters (idle_policy.h) and takes down an
// on_demand node whose models had no request for its idle_off, the way
// destroy takes it down: its serves stop, display RAM is restored, the OS
// shuts down and the switch goes off, read back (models and images stay).
// Never while a person is logged in on it, a GPU process fleet did not
// start runs there, an apply, heal or wake holds the state lock (one try:
// the next round asks again), or a schedule's window says up
// (node_take_down.h). Each decision is an event with why:
// {"event": "idle_off", "time", "address": "node.N", "node",
// "outcome": "powered_off"|"kept"|"failed", "detail"}; a node kept for the
// same reason round after round is reported once.
#ifndef FLEET_SRC_ENGINE_IDLE_ROUND_H_
#define FLEET_SRC_ENGINE_IDLE_ROUND_H_

#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "manifests/manifest.h"
#include "providers/shared/serving/smoke_check.h"
#include "src/engine/idle_policy.h"
#include "src/engine/planner.h"
#include "state/state_store.h"

namespace fleet {

struct IdleRoundInput {
  const Manifest* manifest = nullptr;
  StateStore* store = nullptr;
  const ProbeResult* probed = nullptr;               // the round's plan probe
  const std::vector<SmokeResult>* checks = nullptr;  // the round's checks (fleet's own requests)
  int64_t now_s = 0;                                 // unix seconds
  // Node -> why a schedule holds it on (schedule_policy.h): never idled off.
  std::map<std::string, std::string> held_up;
  std::function<void(const std::string&)> progress;  // may be empty
};

class IdleOff {
 public:
  // One round's decisions and their events.
  std::vector<nlohmann::json> Round(const IdleRoundInput& in);
  // When each awake on_demand node last saw demand, as of the last round.
  const std::map<std::string, int64_t>& LastDemands() const { return clock_.LastDemands(); }

 private:
  IdleClock clock_;
  std::map<std::string, std::string> reported_;  // node -> the last "kept" why reported
};

}  // namespace fleet

#endif  // FLEET_SRC_ENGINE_IDLE_ROUND_H_
