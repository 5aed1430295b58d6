// The deployment provider's diff: a short list of named decisions over what
// the probe found on the node, the state record and the rest of the plan
// (display RAM reloads, ports held by undeclared serves, memory budgets).
#ifndef FLEET_PROVIDERS_DEPLOYMENT_DEPLOYMENT_DIFF_H_
#define FLEET_PROVIDERS_DEPLOYMENT_DEPLOYMENT_DIFF_H_

#include <optional>
#include <string>

#include "providers/shared/serving/deployment_json.h"
#include "src/provider.h"

namespace fleet {

// What the plan says of a running fleet serve `container` that the state
// has no record of (`declared`: the manifests declare it there).
std::string UnrecordedServeNote(const std::string& address, const std::string& node,
                                const std::string& container, bool declared);

// The diff's named decisions, in the order Diff asks them; each returns the
// change it decides, or nothing to let the next one decide. Exposed for
// tests.
namespace deployment_internal {

// Whether the manifests declare deployment `name` on `node`.
bool DeclaredOn(const Manifest& m, const std::string& name, const std::string& node);
// The deployment a fleet serving container is named for ("" when the name
// is not fleet's).
std::string DeploymentOf(const std::string& container);
// Whether the plan's state has no record of `address`.
bool Unrecorded(const DiffContext& ctx, const std::string& address);

// What every decision reads.
struct DeploymentDiffInput {
  const DesiredResource& desired;
  const DeploymentWant& want;
  const ContainerProbe& found;
  const std::optional<DeploymentRecord>& record;
  const DiffContext& ctx;
  const PlanChange& base;  // the noop change: after, detail (and before, once it exists)
};

using Decision = std::optional<PlanChange>;

Decision NotProbed(const DesiredResource& desired, const ActualResource& actual,
                   const PlanChange& base);
Decision ProbeFailed(const DesiredResource& desired, const ActualResource& actual,
                     const DiffContext& ctx, const PlanChange& base);
Decision NoContainer(const DeploymentDiffInput& in);
Decision OtherSpec(const DeploymentDiffInput& in);
Decision OtherImage(const DeploymentDiffInput& in);
Decision Quarantined(const DeploymentDiffInput& in);
Decision StoppedForDisplayRam(const DeploymentDiffInput& in);
Decision NotRunning(const DeploymentDiffInput& in);
Decision HealthUnreadable(const DeploymentDiffInput& in);
// The last: unhealthy past health.timeout -> replace; else a note, or no change.
PlanChange UnhealthyOrStarting(const DeploymentDiffInput& in);
// After the decisions: a new container needs its from_env values here.
void CheckEnvFrom(const DesiredResource& desired, const DeploymentWant& want, PlanChange* c);
// Before the decisions: `desired` rendered again with the probe's fabric
// facts (ctx.all_facts) when its deployment uses the fabric (Expand knows
// only declared ones), or the plan error why it cannot be (a node without a
// fabric, nodes on no common subnet).
Result<DesiredResource> WithFabricFacts(const DesiredResource& desired, const DiffContext& ctx);
// Diff without CheckEnvFrom.
PlanChange DiffContainer(const DesiredResource& desired, const ActualResource& actual,
                         const ResourceRecord* record, const DiffContext& ctx);
// A container of the declared name that the state has no record of: the
// plan says so, and, when it matches (a noop), that adopt takes it over.
void NoteUnrecorded(const DesiredResource& desired, const ActualResource& actual,
                    const ResourceRecord* record, const DiffContext& ctx, PlanChange* c);

}  // namespace deployment_internal

}  // namespace fleet

#endif  // FLEET_PROVIDERS_DEPLOYMENT_DEPLOYMENT_DIFF_H_
