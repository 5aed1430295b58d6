// Executor: runs a Plan's changes through their providers.
//
// Walks the dependency graph with up to `parallelism` steps at once, at most
// one step per node at a time (steps on a node follow dependency order).
// Every finished step is saved to the state before any dependent starts.
// When a step fails, its dependents are skipped, independent branches go on,
// and (unless rollback is off) the steps of this run that the failed step
// depended on, and that nothing else successful still needs, are undone in
// reverse order.
#ifndef FLEET_SRC_ENGINE_EXECUTOR_H_
#define FLEET_SRC_ENGINE_EXECUTOR_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "manifests/manifest.h"
#include "src/engine/node_connections.h"
#include "src/hub_api.h"
#include "src/plan.h"
#include "src/power_switch.h"
#include "src/provider.h"
#include "state/state.h"
#include "state/state_store.h"

namespace fleet {

struct ApplyOptions {
  int parallelism = 10;
  bool rollback = true;
};

struct ApplyReport {
  std::vector<std::string> done;     // applied
  std::vector<std::string> failed;   // "address: error"
  std::vector<std::string> undone;   // rolled back
  std::vector<std::string> kept;     // done, failure downstream, kept by design
  std::vector<std::string> skipped;  // not started: a dependency failed, or the state
                                     // could not be written (apply stops)
  std::vector<std::string> rollback_failed;
  bool ok() const { return failed.empty() && rollback_failed.empty(); }
};

class Executor {
 public:
  // `log` receives one human line per event (thread-safe calls).
  // All pointers must outlive the executor. `power` may be null.
  Executor(const Manifest* manifest, const std::vector<std::unique_ptr<Provider>>* providers,
           NodeConnections* connections, StateStore* store, PowerSwitch* power,
           std::function<void(const std::string&)> log);

  // Applies `plan` on top of `state` (updated in place and saved after each
  // step; the serial is bumped once, at the first change).
  // REQUIRES: the caller holds the state lock.
  ApplyReport Apply(const Plan& plan, State* state, const ApplyOptions& options);

  // The Hub the steps ask again before a download (as Planner::set_hub).
  void set_hub(HubApi* hub) { deps_.hub = hub; }

  // What runs a change that passes a gate (PlanChange::gate) in place of
  // its provider's Apply (src/engine/gate_step.h). Unset: the provider's.
  using GateRunner =
      std::function<Result<nlohmann::json>(const PlanChange& c, const StepContext& ctx)>;
  void set_gate(GateRunner gate) { deps_.gate = std::move(gate); }

  // Where the steps read time and sleep (StepContext::clock) and the log's
  // step durations are measured. Default: the real clock.
  // REQUIRES: clock != nullptr and outlives the executor.
  void set_clock(Clock* clock) { deps_.clock = clock; }

 private:
  friend class ApplyRun;
  // What every step of every Apply shares.
  struct Deps {
    const Manifest* manifest;
    const std::vector<std::unique_ptr<Provider>>* providers;
    NodeConnections* connections;
    StateStore* store;
    PowerSwitch* power;
    std::function<void(const std::string&)> log;
    HubApi* hub = nullptr;
    GateRunner gate;
    Clock* clock = RealClock();
  };
  Deps deps_;
  std::unique_ptr<HubApi> own_hub_;
};

}  // namespace fleet

#endif  // FLEET_SRC_ENGINE_EXECUTOR_H_
