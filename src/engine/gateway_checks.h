// The smoke checks asked through each gateway (`fleet check`): what a
// client of the lab's one endpoint sees.
//
// Per node of each gateway: first the gateway itself (its /v1/models must
// list every routed model), then, for each routed model, the smoke list of
// a deployment serving it, asked through the gateway. The reply must come
// from a serve of that model (the gateway's x-fleet-served-by header), and
// the row names the serve that answered. A gateway that does not answer is
// one error row naming it; its routes are not asked.
#ifndef FLEET_SRC_ENGINE_GATEWAY_CHECKS_H_
#define FLEET_SRC_ENGINE_GATEWAY_CHECKS_H_

#include <vector>

#include "manifests/manifest.h"
#include "providers/shared/serving/smoke_check.h"

namespace fleet {

// Rows: deployment "gateway <name>" for the gateway's own check (node: the
// gateway's), "<deployment> via <gateway>" for a routed check (node: the
// serve that answered). Their times are read from `clock`.
std::vector<SmokeResult> RunGatewayChecks(const Manifest& m, Clock* clock);

}  // namespace fleet

#endif  // FLEET_SRC_ENGINE_GATEWAY_CHECKS_H_
