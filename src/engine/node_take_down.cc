#include "src/engine/node_take_down.h"

#include <algorithm>
#include <set>
#include <vector>

#include "src/engine/executor.h"
#include "src/engine/idle_policy.h"
#include "src/engine/node_connections.h"
#include "src/engine/planner.h"
#include "src/power_switch.h"
#include "state/state.h"

namespace fleet {

namespace {

std::string TakeDownJoined(const std::vector<std::string>& v) {
  std::string s;
  for (const std::string& x : v) s += (s.empty() ? "" : "; ") + x;
  return s;
}

// Destroy's plan for `node` alone: its serves, display RAM and power; the
// gateways routing to it keep running (the serve's health check drops it,
// and the wake backup takes its requests).
Plan TakeDownPlan(const Manifest& m, const std::string& node, const State& state,
                  std::vector<std::unique_ptr<Provider>>* providers, NodeConnections* connections,
                  PowerSwitch* power) {
  PlanOptions po;
  po.destroy = true;
  po.targets = {"node." + node};
  Plan plan = Planner(&m, providers, connections, power).MakePlan(state, po);
  std::set<std::string> kept;
  std::erase_if(plan.changes, [&](const PlanChange& c) { return c.node != node; });
  for (const PlanChange& c : plan.changes) kept.insert(c.address);
  for (PlanChange& c : plan.changes)
    std::erase_if(c.depends_on, [&](const std::string& d) { return !kept.count(d); });
  return plan;
}

}  // namespace

TakeDownResult TakeNodeDown(const Manifest& m, StateStore* store, const std::string& node,
                            const std::function<void(const std::string&)>& progress) {
  using O = TakeDownOutcome;
  Result<std::unique_ptr<StateLock>> lock = LockWithTimeout(store, "take down " + node, 0);
  if (!lock.ok())
    return {O::kKept, "an apply, heal or wake holds the state (" + lock.status().message() + ")"};
  NodeConnections connections(&m);
  Result<CommandResult> found = connections.Get(node)->Run(IdleBlockersScript());
  if (!found.ok()) return {O::kKept, "cannot ask it who uses it: " + found.status().message()};
  if (const std::string why = IdleBlocker(found->out); !why.empty()) return {O::kKept, why};
  Result<State> state = store->Load();
  if (!state.ok()) return {O::kKept, "the state: " + state.status().message()};
  std::vector<std::unique_ptr<Provider>> providers = MakeProviders();
  std::unique_ptr<PowerSwitch> power = MakeDeclaredPowerSwitch(m.power);
  const Plan plan = TakeDownPlan(m, node, *state, &providers, &connections, power.get());
  if (!plan.errors.empty())
    return {O::kFailed, "its take-down plan: " + TakeDownJoined(DiagnosticLines(plan.errors))};
  Executor executor(&m, &providers, &connections, store, power.get(), [&](const std::string& line) {
    if (progress) progress(line);
  });
  const ApplyReport report = executor.Apply(plan, &state.value(), ApplyOptions{});
  if (!report.ok()) return {O::kFailed, TakeDownJoined(report.failed)};
  return {O::kPoweredOff,
          "taken down as destroy would (" + std::to_string(report.done.size()) + " steps)"};
}

}  // namespace fleet
