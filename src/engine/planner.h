// Planner: manifests + probed facts + state -> Plan. Changes nothing.
//
// Two halves, as ninja keeps its Plan apart from the disk it stats: the
// I/O (ProbeNodes, probe_nodes.h, run by Planner::MakePlan) reads the
// nodes; PlanFrom decides the plan from what was read, with no I/O, no
// clock and no threads of its own, so that plan logic is tested on facts
// built in memory (planner_test.cc). The type-specific decisions are the
// providers' (Provider::IsNodeItself, PowerOf, UnplannedCost, the diffs):
// the planner names no resource type.
#ifndef FLEET_SRC_ENGINE_PLANNER_H_
#define FLEET_SRC_ENGINE_PLANNER_H_

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "manifests/manifest.h"
#include "src/engine/node_connections.h"
#include "src/engine/probe_nodes.h"
#include "src/hub_api.h"
#include "src/plan.h"
#include "src/power_switch.h"
#include "src/provider.h"
#include "state/state.h"

namespace fleet {

struct PlanOptions {
  bool destroy = false;
  std::vector<std::string> targets;  // addresses; empty = everything
  int probe_parallelism = 64;        // nodes probed at once
  bool purge = false;                // see DiffContext::purge
  // When set, receives what the plan probed (fleet watch --heal reads the
  // round's facts from it instead of probing twice).
  ProbeResult* probed_out = nullptr;
};

// What PlanFrom decides with besides its inputs. All must outlive the call.
struct PlanContext {
  const Manifest* manifest = nullptr;
  // In dependency order of their types (MakeProviders): the tie-break of
  // the plan's order, and the order undeclared removals follow.
  const std::vector<std::unique_ptr<Provider>>* providers = nullptr;
  // Handed to the desired resources' diffs (a model's sizes), the one
  // outside source a diff may ask; null: not asked.
  HubApi* hub = nullptr;
  // Whether a fan-out's copies become one chain (ChainFanOuts); the
  // controller's FLEET_FABRIC_CHAIN=off turns it off.
  bool chain_fan_outs = true;
};

// What a plan covers, decided from the manifests, the state and the
// options before anything is read from a node.
struct PlanScope {
  // Targets that name no resource: nothing is probed nor planned.
  std::vector<PlanDiagnostic> errors;
  std::vector<DesiredResource> in_plan;   // desired, within the targets
  std::vector<DesiredResource> to_probe;  // in_plan less what sits on a node declared off
  std::set<std::string> declared_off;     // nodes
  // The nodes whose providers' InventoryScripts run (a whole plan: every
  // node-itself resource probed).
  std::set<std::string> inventory_nodes;
  // The addresses of the state's records the manifests no longer declare,
  // within the targets: each one's provider decides what becomes of it.
  std::set<std::string> orphans;
};

// REQUIRES: every type of `desired` has a provider in ctx.providers.
PlanScope ScopeOf(const PlanContext& ctx, const std::vector<DesiredResource>& desired,
                  const State& state, const PlanOptions& options);

// The plan that brings what `probed` found to `desired`, given `state`:
// each resource's provider diffs it, state records no longer declared are
// removed or forgotten, then the changes are ordered (dependencies,
// undeclared removals, create before destroy; reversed for destroy).
// Plan errors (an unknown target, a node's wrong identity, a node the probe
// failed on, a dependency cycle) land in plan.errors; nodes that do not
// answer in plan.unreachable. Reads only its arguments; options.probed_out
// and options.probe_parallelism are not used.
// REQUIRES: `desired` is what ctx.providers expand from ctx.manifest, and
// `probed` covers ScopeOf(ctx, desired, state, options).to_probe (a node
// missing from it reads as unreachable).
Plan PlanFrom(const PlanContext& ctx, const std::vector<DesiredResource>& desired,
              const ProbeResult& probed, const State& state, const PlanOptions& options);

class Planner {
 public:
  // All arguments must outlive the planner. `power` (may be null: no
  // controller) is read beside each node's probe (ProbeSetting).
  Planner(const Manifest* manifest, const std::vector<std::unique_ptr<Provider>>* providers,
          NodeConnections* connections, PowerSwitch* power = nullptr);

  // The desired resources of the manifest, from every provider.
  std::vector<DesiredResource> Desired() const;

  // ProbeNodes with this planner's manifest, providers, connections and
  // power controller.
  ProbeResult Probe(const std::vector<DesiredResource>& desired, int parallelism,
                    const std::set<std::string>& inventory_nodes = {});

  // Probes what ScopeOf says, then PlanFrom. Plan errors (identity
  // mismatch, unreachable node without a switch, unknown target) land in
  // plan.errors.
  Plan MakePlan(const State& state, const PlanOptions& options);

  const Provider* ProviderFor(const std::string& type) const;

  // The Hub the diffs ask (a model's sizes). By default the one
  // MakeHubApiFor(manifest) makes, asked only when a diff needs it; tests
  // hand a fake (must outlive the planner) or null (not asked).
  void set_hub(HubApi* hub) { hub_ = hub; }

 private:
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
