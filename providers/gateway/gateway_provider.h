// GatewayProvider (`gateway.<name>@<node>`): an HAProxy in front of the
// fleet's serves on each node of a `gateways:` entry, routing an OpenAI
// request by its model to the serves of that model (gateway_config.h).
//
// The container is `fleet-gw-<name>`, labelled fleet.gateway=<name> and
// fleet.spec=<hash of what it is started with>, on the host network, with
// its config directory (~/.fleet/gateways/<name>) bound read-only.
//
// Diff: absent -> create; another spec (image, port) -> replace; stopped ->
// update (start); running with another config loaded than the routes now
// declared -> update, a hitless reload whose reasons are the routes' diff
// ("+ qwen3.8 -> dgx3:30000", "- qwen3.8 -> dgx5:30000"). A routed
// deployment whose model name fleet cannot read is a plan error asking for
// served_model (or gateway: false).
//
// A gateway depends on the serves it routes to, so a reload runs after a
// moved serve answered (health and smoke); the planner then makes the old
// serve's removal wait for the reload (src/engine/gateway_order.h). Apply
// waits until the running HAProxy answers with the new config, and after a
// reload until the old worker finished what it carried (drain).
#ifndef FLEET_PROVIDERS_GATEWAY_GATEWAY_PROVIDER_H_
#define FLEET_PROVIDERS_GATEWAY_GATEWAY_PROVIDER_H_

#include "providers/gateway/gateway_config.h"
#include "src/provider.h"

namespace fleet {

// The routes every gateway of `m` serves: the head of each deployment not
// marked gateway: false (every node of a deployment of replicas), by the
// model it serves. `unnamed` gets the deployments whose model name is not
// known (no served_model, and none in the recipe); `unsafe` (when given)
// gets why each route left out for a GatewayRouteProblem was (a rendered
// name the recipe lint could not see, such as a {model_path} with a space).
// Sorted.
std::vector<GatewayRoute> GatewayRoutes(const Manifest& m, std::vector<std::string>* unnamed,
                                        std::vector<std::string>* unsafe = nullptr);

class GatewayProvider : public Provider {
 public:
  std::string type() const override { return "gateway"; }
  Role role() const override { return Role::kGateway; }
  std::vector<DesiredResource> Expand(const Manifest& m) const override;
  std::string ProbeScript(const DesiredResource& r, const NodeSpec& node) const override;
  ActualResource ParseProbe(const DesiredResource& r, const std::string& output,
                            const NodeFacts& facts) const override;
  PlanChange Diff(const DesiredResource& desired, const ActualResource& actual,
                  const ResourceRecord* record, const DiffContext& ctx) const override;
  PlanChange DiffDestroy(const DesiredResource& desired, const ActualResource& actual,
                         const ResourceRecord* record, const DiffContext& ctx) const override;
  PlanChange DiffOrphan(const ResourceRecord& record, const DiffContext& ctx) const override;
  Result<nlohmann::json> Apply(const PlanChange& change, const StepContext& ctx) const override;
  // Clients of the whole lab reach the serves through a gateway.
  std::string UnplannedCost(const DesiredResource& r) const override;
};

}  // namespace fleet

#endif  // FLEET_PROVIDERS_GATEWAY_GATEWAY_PROVIDER_H_
