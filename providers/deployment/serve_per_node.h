// One serve per node: a GB10 holds one large model. When the manifests move
// a node from deployment A to deployment B (the log's "stop MiMo Pro 8x to
// free the nodes" before MiMo Flash 2x), B's start on that node waits for
// A's removal there, whatever the ports: the two never run together.
// (Two deployments declared on one node are a validate error unless both
// say shared: true; see manifests/manifest_checks.h.)
#ifndef FLEET_PROVIDERS_DEPLOYMENT_SERVE_PER_NODE_H_
#define FLEET_PROVIDERS_DEPLOYMENT_SERVE_PER_NODE_H_

#include <string>
#include <vector>

#include "src/provider.h"

namespace fleet {

// The fleet serving containers among `serving` (running on `node`, with the
// fleet.deployment label) that the manifests no longer declare on `node`.
std::vector<std::string> DisplacedServes(const Manifest* m, const std::string& node,
                                         const std::vector<std::string>& serving);

// For a serve about to start (`c`, of `desired`): depends on the removal of
// every displaced serve on its node, and says so.
void WaitForDisplacedServes(const DesiredResource& desired, const DiffContext& ctx,
                            const std::vector<std::string>& serving, PlanChange* c);

}  // namespace fleet

#endif  // FLEET_PROVIDERS_DEPLOYMENT_SERVE_PER_NODE_H_
