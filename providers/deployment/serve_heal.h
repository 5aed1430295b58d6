// Bringing back a serve that died, hung or garbles, as its state record says
// it ran (`fleet watch --heal`): never what the manifests say now when they
// changed since the last apply (that change stays drift, for a reviewed
// apply).
#ifndef FLEET_PROVIDERS_DEPLOYMENT_SERVE_HEAL_H_
#define FLEET_PROVIDERS_DEPLOYMENT_SERVE_HEAL_H_

#include <string>

#include "providers/shared/serving/deployment_json.h"
#include "src/provider.h"
#include "src/status.h"

namespace fleet {

// Brings deployment `name`'s serve on ctx.node back to the spec `recorded`
// holds: the container of that spec, when it is still there, is started
// again (stopped first when it runs: a hung or garbling engine); when it is
// gone, a new one is run from the image by digest, but only while the
// manifests still render the recorded spec (else an error saying so:
// nothing else is started). Waits for health and smoke as apply does; a
// worker of a group stops the head's old container first.
// Returns `recorded` with the new container's id (its heal ledger as given).
// REQUIRES: ctx.node, ctx.manifest and a connected ctx.transport.
// drop_page_cache: the serve fits only once the page cache is dropped
// (unified memory): DropPageCache before the start.
Result<DeploymentRecord> HealServe(const StepContext& ctx, const std::string& name,
                                   const DeploymentRecord& recorded, bool drop_page_cache = false);

}  // namespace fleet

#endif  // FLEET_PROVIDERS_DEPLOYMENT_SERVE_HEAL_H_
