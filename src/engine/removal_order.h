// Removals in a plan that are no longer declared (records the manifests
// dropped, and with --purge what the nodes hold unrecorded) have no declared
// dependencies, so nothing ordered them: a purge removed a serve's image and
// model while the serve still ran on them ("image ... is used by container
// fleet-serve; not removed"), found by tests/faults. The graph of what they
// were is gone with the manifests; what is left is the order of the types
// (a deployment needs its image and model, they need the node's display RAM
// and the node), so on each node such a removal waits for the removals of
// every later type, the way destroy walks the graph backwards.
#ifndef FLEET_SRC_ENGINE_REMOVAL_ORDER_H_
#define FLEET_SRC_ENGINE_REMOVAL_ORDER_H_

#include <map>
#include <string>
#include <vector>

#include "src/plan.h"

namespace fleet {

// Adds to every delete change whose address is not declared (a key of
// `declared`: the desired resources, keyed by address) a
// dependency on each other undeclared delete on the same node whose type
// comes later in `type_order` (the providers' order: node ... deployment).
// Acyclic: an added edge always goes to a strictly later type.
void OrderUndeclaredRemovals(const std::map<std::string, std::vector<std::string>>& declared,
                             const std::vector<std::string>& type_order,
                             std::vector<PlanChange>* changes);

}  // namespace fleet

#endif  // FLEET_SRC_ENGINE_REMOVAL_ORDER_H_
