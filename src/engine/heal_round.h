// `fleet watch --heal`: after a round's plan and smoke checks, brings back
// the recorded serves that died, hung or garble, as their restart policy
// allows (heal_policy.h), with the spec their state record holds
// (providers/deployment/serve_heal.h). It takes the state lock as apply
// does to decide and to record a heal's start and its end, never across
// the heal's own wait: a serve of the lab boots for 15-45 minutes, and the
// rounds, an apply of another deployment and other heals go on meanwhile.
// An apply that replaces a serve while it heals takes it over: the heal,
// when it ends, finds the record rewritten and records nothing.
#ifndef FLEET_SRC_ENGINE_HEAL_ROUND_H_
#define FLEET_SRC_ENGINE_HEAL_ROUND_H_

#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "manifests/manifest.h"
#include "providers/shared/serving/smoke_check.h"
#include "src/clock.h"
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
  // How long the round waits for the heals it started before it reports;
  // one that takes longer goes on beside the next rounds (--heal-wait).
  int64_t heal_wait_ms = 30000;
  std::function<void(const std::string&)> progress;  // may be empty
  // Where the round reads the time (backoffs, busy time) and the heals
  // wait (health, lock). Never null; must outlive the heals it starts.
  Clock* clock = RealClock();
};

// Keeps, between rounds, how many rounds in a row each serve's health URL
// failed (health.grace); the rest lives in the state (HealLedger).
class Healer {
 public:
  // At most `parallel` heals run at once (the ranks of one group are one).
  explicit Healer(int parallel = 4);
  // Heals still running are left to finish in the next watch (their
  // records say in progress): REQUIRES the process exits without running
  // static destructors while Running() > 0 (std::_Exit).
  ~Healer();
  Healer(const Healer&) = delete;
  Healer& operator=(const Healer&) = delete;

  // One round: decides for every serve the state records and the manifests
  // still declare on that node, and acts. Returns the round's events, each
  // one JSON object: {"event": "heal"|"heal_wait"|"quarantine", "time",
  // "address", "deployment", "node", "reason", "attempt", "outcome",
  // "duration_s", "detail"}. They are also appended to the store's history.
  std::vector<nlohmann::json> Round(const HealRoundInput& in);

  // Waits for the heals still running and records them (a watch that ends
  // after --rounds). Returns their events.
  std::vector<nlohmann::json> Drain(const HealRoundInput& in);

  // Heals started and not yet recorded.
  size_t Running() const { return jobs_.size(); }

 private:
  struct Job;  // one heal (a group's, in order) on connections of its own
  // Records the heals that ended (waiting up to `wait_ms` for them).
  std::vector<nlohmann::json> Finish(const HealRoundInput& in, int64_t wait_ms);

  std::map<std::string, int> unhealthy_rounds_;
  // Since when (unix seconds) each serve's health probe has timed out while
  // its container runs, in every round since: busy (health.busy_grace).
  std::map<std::string, int64_t> busy_since_;
  std::vector<std::unique_ptr<Job>> jobs_;
  int parallel_;
};

}  // namespace fleet

#endif  // FLEET_SRC_ENGINE_HEAL_ROUND_H_
