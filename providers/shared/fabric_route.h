// FabricRoute: how a copy between two nodes goes, decided at plan time and
// carried in the plan's detail to apply: directly over the fabric between
// the two nodes (FabricStream), or through the controller (StreamCopy),
// with the reason when it is the latter.
#ifndef FLEET_PROVIDERS_SHARED_FABRIC_ROUTE_H_
#define FLEET_PROVIDERS_SHARED_FABRIC_ROUTE_H_

#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "manifests/manifest.h"
#include "providers/shared/fabric_facts.h"
#include "src/plan.h"
#include "src/resource.h"
#include "src/settings.h"
#include "src/status.h"
#include "src/transport.h"

namespace fleet {

struct FabricRoute {
  bool direct = false;
  std::string from, to;
  std::string source_address, target_address;  // fabric IPv4s when direct
  std::string subnet;                          // "10.77.0.0/24" ("" when not known)
  std::string why_not;                         // when !direct
  // why_not in words that name no single target ("no common fabric
  // subnet"), for the plan's line per source (CopyRoute::why_not).
  std::string why_not_short;

  // "dgx4 → dgx1 over fabric 10.77.0.0/24", or
  // "dgx4 → dgx1 through the controller (dgx1 has no fabric address: ...)".
  std::string Describe() const;
  nlohmann::json ToJson() const;
  static FabricRoute FromJson(const nlohmann::json& j);
  // The plan's typed view of this route for a copy of `what` ("image b12x").
  CopyRoute ForPlan(const std::string& what) const;
};

// The fabric endpoint of `node`: declared in `m` (checked against its
// probed ports), else probed. `facts` may be null or lack the node (not
// probed): only a declaration counts then. An unknown node has none.
FabricEndpoint NodeFabricEndpoint(const Manifest& m, const std::map<std::string, NodeFacts>* facts,
                                  const std::string& node);

// The route for a copy from `from` to `to`: direct when both have a usable
// fabric endpoint (declared or probed) in one subnet, and the controller's
// settings do not say FLEET_FABRIC=off. `facts` may be null or lack a
// node (not probed): only a declared endpoint counts then.
FabricRoute PlanFabricRoute(const Manifest* m, const std::map<std::string, NodeFacts>* facts,
                            const std::string& from, const std::string& to,
                            const Settings& settings);

// Apply's re-check of a direct route the plan chose (the fabric may have
// gone since): the target still has route.target_address on an interface,
// and the source has a route to it. "" when usable (or when a node has no
// `ip` to tell), else why not, naming the node ("dgx2 no longer has
// 10.77.0.12 on any interface"). The caller then copies through the
// controller and says so. A transport failure is the Status.
Result<std::string> FabricRouteProblem(Transport* source, Transport* target,
                                       const FabricRoute& route);

// Its two halves, for a chain's many targets at once: the target still has
// `address` ("" or why not, naming `node`), and the addresses of
// `addresses` the source has no route to (one command for all).
Result<std::string> FabricAddressProblem(Transport* target, const std::string& node,
                                         const std::string& address);
Result<std::set<std::string>> UnroutedAddresses(Transport* source,
                                                const std::vector<std::string>& addresses);

// The scripts the re-check runs (exit 0: fine, 1: not), for tests.
std::string HasAddressScript(const std::string& address);
std::string HasRouteScript(const std::string& address);

}  // namespace fleet

#endif  // FLEET_PROVIDERS_SHARED_FABRIC_ROUTE_H_
