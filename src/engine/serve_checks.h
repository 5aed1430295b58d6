// The smoke checks of a fleet's serves, run from the controller: what
// `fleet check` prints and each round of `fleet watch` records.
//
// For every deployment chosen (all, or those named: deployment.NAME,
// deployment.NAME@NODE, NAME, NAME@NODE), on every node that serves its API
// (each replica; the head of an engine across nodes), RunSmoke: identity,
// model, then its `smoke:` list. A failed identity check names the serve
// the client address reaches instead, by asking the other serving nodes.
// Serves are checked in parallel (one thread each); results come back in
// the manifest's order. With no address chosen, the checks through each
// gateway follow (gateway_checks.h).
#ifndef FLEET_SRC_ENGINE_SERVE_CHECKS_H_
#define FLEET_SRC_ENGINE_SERVE_CHECKS_H_

#include <string>
#include <vector>

#include "manifests/manifest.h"
#include "providers/shared/serving/smoke_check.h"
#include "src/engine/node_connections.h"

namespace fleet {

// Fails (naming the nearest) when an address names no deployment or node
// of the manifest.
Status ValidateCheckAddresses(const Manifest& m, const std::vector<std::string>& addresses);

// The smoke checks of the serves `addresses` name (all when empty, and then
// the gateways' too), their times read from `clock`.
std::vector<SmokeResult> RunServeChecks(const Manifest& m, NodeConnections* connections,
                                        const std::vector<std::string>& addresses, Clock* clock);

// The table: DEPLOYMENT NODE CHECK RESULT LATENCY T/S, then every result
// that did not pass with its detail and samples.
std::string RenderCheckTable(const std::vector<SmokeResult>& results);

}  // namespace fleet

#endif  // FLEET_SRC_ENGINE_SERVE_CHECKS_H_
