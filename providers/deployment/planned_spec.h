// The spec a deployment step runs: rendered from the manifests again, with
// the facts the plan found (fabric values, tensor rows), and refused when it
// is no longer the one the plan showed.
#ifndef FLEET_PROVIDERS_DEPLOYMENT_PLANNED_SPEC_H_
#define FLEET_PROVIDERS_DEPLOYMENT_PLANNED_SPEC_H_

#include <string>

#include "providers/shared/serving/deployment_spec.h"
#include "src/provider.h"
#include "src/status.h"

namespace fleet {

// `declared` with its {rows:...} placeholders filled from the rows its probe
// read on the node. Sets *error when they cannot be (no model, no such
// tensor), *note when the model is not on the node yet (the step reads them).
DesiredResource WithProbedRows(const DesiredResource& declared, const ActualResource& actual,
                               const DiffContext& ctx, std::string* error, std::string* note);

// The spec the step of `change` runs for deployment `name` on ctx.node: the
// plan's fabric facts, a {rows:...} recipe's rows read again on the node;
// an error when the manifests changed since the plan.
Result<ContainerSpec> SpecAsPlanned(const PlanChange& change, const StepContext& ctx,
                                    const std::string& name);

}  // namespace fleet

#endif  // FLEET_PROVIDERS_DEPLOYMENT_PLANNED_SPEC_H_
