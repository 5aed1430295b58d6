// Probing: what the nodes hold, read in one round trip per node. This is
// the planner's I/O and its hot path: every node is probed in parallel,
// each with one connection and one script (the fragments of every resource
// on it), so a converged node costs one round trip whatever the number of
// its resources. What it returns is a plain value that PlanFrom
// (planner.h) turns into a plan without touching a node.
#ifndef FLEET_SRC_ENGINE_PROBE_NODES_H_
#define FLEET_SRC_ENGINE_PROBE_NODES_H_

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "manifests/manifest.h"
#include "src/clock.h"
#include "src/engine/node_connections.h"
#include "src/power_switch.h"
#include "src/provider.h"
#include "src/resource.h"

namespace fleet {

struct ProbeResult {
  std::map<std::string, NodeFacts> facts;          // by node
  std::map<std::string, ActualResource> actual;    // by address
  std::map<std::string, std::string> node_errors;  // by node: cannot plan it at all
  // What each provider's InventoryScript printed, by node then type (only
  // where it ran and exited 0).
  std::map<std::string, std::map<std::string, std::string>> inventory;
};

// What a probe reads with: the manifest (the nodes), the providers (their
// fragments and parsers), the nodes' transports, and the power controller
// (may be null: none), whose switch state of each node lands in its
// NodeFacts (power_switch_state / _error), for the node provider to decide
// on. All must outlive the probe.
struct ProbeSetting {
  const Manifest* manifest = nullptr;
  const std::vector<std::unique_ptr<Provider>>* providers = nullptr;
  NodeConnections* connections = nullptr;
  PowerSwitch* power = nullptr;
  // Times each node's round trip for the debug log.
  Clock* clock = RealClock();
};

// Probes the nodes that hold `desired`, up to `parallelism` at once, and on
// those in `inventory_nodes` runs the providers' InventoryScripts too (in
// the same round trip). A node that does not answer is in the result's
// facts as unreachable; any other failure is in node_errors.
// REQUIRES: every node of `desired` is a node of setting.manifest, and every
// type of `desired` has a provider.
ProbeResult ProbeNodes(const ProbeSetting& setting, const std::vector<DesiredResource>& desired,
                       int parallelism, const std::set<std::string>& inventory_nodes = {});

}  // namespace fleet

#endif  // FLEET_SRC_ENGINE_PROBE_NODES_H_
