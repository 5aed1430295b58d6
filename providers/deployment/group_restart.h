// Multi-node groups restart together. In a deployment whose recipe runs one
// engine across its nodes ({rank}, {nnodes}, {head}), a rank cannot rejoin a
// running group: when any rank is replaced, started or missing (its spec
// changed, its container died or is gone), every other rank is replaced too.
// The head depends on its workers (DeploymentProvider::Expand), so the
// workers restart first and the head starts last; a worker's step stops the
// head's old container before the worker starts, so that no old head runs
// beside new workers.
#ifndef FLEET_PROVIDERS_DEPLOYMENT_GROUP_RESTART_H_
#define FLEET_PROVIDERS_DEPLOYMENT_GROUP_RESTART_H_

#include "src/provider.h"

namespace fleet {

// Turns `c` (the change for one rank of `desired`'s deployment) into a
// replace, with the reason, when another rank of the group does not run its
// declared spec now. Leaves creates, replaces and non-group deployments alone.
void RestartWithGroup(const DesiredResource& desired, const DiffContext& ctx, PlanChange* c);

// A worker's step: stops the head's old container of `spec`'s deployment
// (on the deployment's first node) when it runs, before the worker starts.
struct ContainerSpec;
Status StopOldHead(const StepContext& ctx, const ContainerSpec& spec);

}  // namespace fleet

#endif  // FLEET_PROVIDERS_DEPLOYMENT_GROUP_RESTART_H_
