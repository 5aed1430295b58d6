// Fabric facts for the containers of a deployment on several nodes (the
// NCCL/Gloo/UCX setup the DGX Spark playbooks do by hand): which
// deployments use the fabric, each node's FabricValues (fabric_values.h)
// from its declared or probed fabric endpoint (providers/node/
// fabric_route.h), and the plan errors when they cannot be had.
//
// The values are found at plan time, where the probe's facts are, and
// travel in the plan (ContainerShown::fabric), so that apply renders the
// very spec the plan showed; they are part of the spec hash, so a fabric
// change replaces the serve.
#ifndef FLEET_PROVIDERS_DEPLOYMENT_DEPLOYMENT_FABRIC_H_
#define FLEET_PROVIDERS_DEPLOYMENT_DEPLOYMENT_FABRIC_H_

#include <map>
#include <string>

#include "manifests/manifest.h"
#include "providers/shared/serving/deployment_spec.h"
#include "providers/shared/serving/fabric_values.h"
#include "src/resource.h"
#include "src/status.h"

namespace fleet {

// True when `dep` says fabric_env: true or its recipe uses a fabric
// placeholder ({fabric_addr}, {fabric_if}, {fabric_hca},
// {fabric_gid_index}, {head_fabric_addr}).
bool UsesFabric(const DeploymentSpec& dep);

// The FabricValues of `node` in deployment `name`: its endpoint and the
// head's (the first node's) address. `facts` (by node; may be null before
// the probe) gives the probed ports; a declared `fabric:` needs none.
// Errors, naming the nodes:
//  - a node of the deployment has no usable fabric endpoint;
//  - a node shares no fabric subnet with the head;
//  - a placeholder the recipe uses has no value on `node` (e.g. {fabric_hca}
//    where no active HCA was probed), or fabric_env without an interface.
Result<FabricValues> DeploymentFabric(const Manifest& m, const std::string& name,
                                      const std::string& node,
                                      const std::map<std::string, NodeFacts>* facts);

// RenderContainerSpec with DeploymentFabric's values when the deployment
// uses the fabric, else RenderContainerSpec alone (`rows`: the {rows:...}
// tensors' rows, passed on).
Result<ContainerSpec> RenderWithFabric(const Manifest& m, const std::string& name,
                                       const std::string& node,
                                       const std::map<std::string, NodeFacts>* facts,
                                       const TensorRowCounts* rows = nullptr);

}  // namespace fleet

#endif  // FLEET_PROVIDERS_DEPLOYMENT_DEPLOYMENT_FABRIC_H_
