// Planner: manifests + probed facts + state -> Plan. Changes nothing.
//
// Probing is the hot path: every node is probed in parallel, each with one
// connection and one script (the fragments of every resource on it), so a
// converged node costs one round trip whatever the number of its resources.
#ifndef FLEET_SRC_ENGINE_PLANNER_H_
#define FLEET_SRC_ENGINE_PLANNER_H_

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "manifests/manifest.h"
#include "src/engine/node_connections.h"
#include "src/hub_api.h"
#include "src/plan.h"
#include "src/power_switch.h"
#include "src/provider.h"
#include "state/state.h"

namespace fleet {

struct ProbeResult;

struct PlanOptions {
  bool destroy = false;
  std::vector<std::string> targets;  // addresses; empty = everything
  int probe_parallelism = 64;        // nodes probed at once
  bool purge = false;                // see DiffContext::purge
  // When set, receives what the plan probed (fleet watch --heal reads the
  // round's facts from it instead of probing twice).
  ProbeResult* probed_out = nullptr;
};

struct ProbeResult {
  std::map<std::string, NodeFacts> facts;          // by node
  std::map<std::string, ActualResource> actual;    // by address
  std::map<std::string, std::string> node_errors;  // by node: cannot plan it at all
  // What each provider's InventoryScript printed, by node then type (only
  // where it ran and exited 0).
  std::map<std::string, std::map<std::string, std::string>> inventory;
};

class Planner {
 public:
  // All arguments must outlive the planner. `power` (may be null: no
  // controller) is read beside each node's probe: the state of the node's
  // switch lands in its NodeFacts (power_switch_state / _error), for the
  // node provider to decide on.
  Planner(const Manifest* manifest, const std::vector<std::unique_ptr<Provider>>* providers,
          NodeConnections* connections, PowerSwitch* power = nullptr);

  // The desired resources of the manifest, from every provider.
  std::vector<DesiredResource> Desired() const;

  // Probes the nodes that hold `desired` (all of them in parallel), and on
  // those in `inventory_nodes` runs the providers' InventoryScripts too (in
  // the same round trip).
  ProbeResult Probe(const std::vector<DesiredResource>& desired, int parallelism,
                    const std::set<std::string>& inventory_nodes = {});

  // Probes and diffs. Plan errors (identity mismatch, unreachable node
  // without a switch, unknown target) land in plan.errors.
  Plan MakePlan(const State& state, const PlanOptions& options);

  const Provider* ProviderFor(const std::string& type) const;

  // The Hub the diffs ask (a model's sizes). By default the one
  // MakeHubApiFor(manifest) makes, asked only when a diff needs it; tests
  // hand a fake (must outlive the planner) or null (not asked).
  void set_hub(HubApi* hub) { hub_ = hub; }

 private:
  // One node's probe (Probe runs it for every node in parallel).
  void ProbeNode(const std::string& node, const std::vector<const DesiredResource*>& resources,
                 bool inventory, ProbeResult& out);
  // Reads `node`'s switch into `facts`, when it has one and there is a
  // controller.
  void ReadSwitch(const std::string& node, NodeFacts* facts) const;

  const Manifest* manifest_;
  const std::vector<std::unique_ptr<Provider>>* providers_;
  NodeConnections* connections_;
  PowerSwitch* power_ = nullptr;
  std::unique_ptr<HubApi> own_hub_;
  HubApi* hub_ = nullptr;
};

// Orders `changes` so that every change comes after those it depends on
// (ties: provider order, then address). Dependencies on addresses not in
// `changes` are ignored. Returns false on a cycle.
bool SortByDependencies(std::vector<PlanChange>* changes,
                        const std::vector<std::string>& type_order);

}  // namespace fleet

#endif  // FLEET_SRC_ENGINE_PLANNER_H_
