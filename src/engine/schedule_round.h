// `fleet watch --heal`: the deployments' and nodes' `schedule` windows act
// (schedule_policy.h decides). A window that says up brings a sleeping
// node of its deployment up through the wake path (WakeListener::Wake:
// switch on, read back, SSH, that deployment's part of the plan under the
// state lock; one wake per node, the wake's backoff after a failure); a
// node's own window powers a node that holds no serve on the same way
// (its display RAM as declared), and
// holds its nodes on against idle off. A window's end takes its nodes down
// as idle off does (node_take_down.h: destroy's order, same blockers).
// Each decision is an event with why: {"event": "schedule", "time",
// "address": "deployment.D@NODE", "deployment", "nodes", "outcome":
// "waking"|"backing_off"|"powered_off"|"kept"|"left_on"|"failed", "detail"}
// (a node's own schedule: "address": "node.NODE", "node"; and "deployment"
// where it brings one up); the same outcome and detail for a deployment or
// a node is reported once.
#ifndef FLEET_SRC_ENGINE_SCHEDULE_ROUND_H_
#define FLEET_SRC_ENGINE_SCHEDULE_ROUND_H_

#include <cstdint>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "manifests/manifest.h"
#include "src/engine/planner.h"
#include "src/engine/wake_listener.h"
#include "state/state_store.h"

namespace fleet {

struct ScheduleRoundInput {
  const Manifest* manifest = nullptr;
  StateStore* store = nullptr;
  const ProbeResult* probed = nullptr;  // the round's plan probe: which nodes are on
  int64_t now_s = 0;                    // unix seconds
  WakeListener* waker = nullptr;        // brings a deployment up
  // Node -> when a request for its models last came (idle off's clock).
  std::map<std::string, int64_t> last_demand;
  std::function<void(const std::string&)> progress;  // may be empty
};

class ScheduleRound {
 public:
  // One round's decisions and their events. *held_up receives the nodes a
  // window holds on, with why (for idle off).
  std::vector<nlohmann::json> Round(const ScheduleRoundInput& in,
                                    std::map<std::string, std::string>* held_up);

 private:
  int64_t last_round_s_ = 0;
  std::map<std::string, int64_t> owed_down_;
  std::map<std::string, int64_t> owed_node_down_;
  // "deployment" or "node NODE deployment" -> the last outcome and detail
  std::map<std::string, std::string> reported_;
};

}  // namespace fleet

#endif  // FLEET_SRC_ENGINE_SCHEDULE_ROUND_H_
