// FabricRoute: how a copy between two nodes goes, decided at plan time and
// carried in the plan's detail to apply: directly over the fabric between
// the two nodes (FabricStream), or through the controller (StreamCopy),
// with the reason when it is the latter.
#ifndef FLEET_PROVIDERS_NODE_FABRIC_ROUTE_H_
#define FLEET_PROVIDERS_NODE_FABRIC_ROUTE_H_

#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "manifests/manifest.h"
#include "providers/node/fabric_facts.h"
#include "src/resource.h"

namespace fleet {

struct FabricRoute {
  bool direct = false;
  std::string from, to;
  std::string source_address, target_address;  // fabric IPv4s when direct
  std::string subnet;                          // "10.77.0.0/24" ("" when not known)
  std::string why_not;                         // when !direct

  // "dgx4 → dgx1 over fabric 10.77.0.0/24", or
  // "dgx4 → dgx1 through the controller (dgx1 has no fabric address: ...)".
  std::string Describe() const;
  nlohmann::json ToJson() const;
  static FabricRoute FromJson(const nlohmann::json& j);
};

// The fabric endpoint of `node`: declared in `m` (checked against its
// probed ports), else probed. `facts` may be null or lack the node (not
// probed): only a declaration counts then. An unknown node has none.
FabricEndpoint NodeFabricEndpoint(const Manifest& m, const std::map<std::string, NodeFacts>* facts,
                                  const std::string& node);

// The route for a copy from `from` to `to`: direct when both have a usable
// fabric endpoint (declared or probed) in one subnet, and the controller's
// environment does not say FLEET_FABRIC=off. `facts` may be null or lack a
// node (not probed): only a declared endpoint counts then.
FabricRoute PlanFabricRoute(const Manifest* m, const std::map<std::string, NodeFacts>* facts,
                            const std::string& from, const std::string& to);

}  // namespace fleet

#endif  // FLEET_PROVIDERS_NODE_FABRIC_ROUTE_H_
