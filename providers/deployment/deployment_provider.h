// DeploymentProvider (`deployment.<name>@<node>`): a recipe serving on a
// node, healthy.
//
// The container is `fleet-<name>`, labelled fleet.deployment=<name> and
// fleet.spec=<hash of what it runs> (ContainerSpec). The probe reads its
// state, its spec label and, when it runs, its health URL on the node.
//
// Diff: absent -> create; another spec -> replace (the reasons say what
// changed against the state record); stopped, or stopped by a display RAM
// reload planned on the node -> update (start it again); running but
// unhealthy for longer than health.timeout -> replace; still within it ->
// no change, with a note. Something else listening on the port of a
// container that is not running is a plan error.
//
// Apply never pulls: the image must be on the node by digest (else an error
// naming image.<name>@<node>), and `run --pull=never` starts it from the
// image's ID (the log's silent internet pull). The model is bound file by
// file, read-only, with no symlink (ModelBindList). Env goes through an env
// file (0600) so no value is on a command line. The step ends when the
// health URL answers 2xx; a container that exits or stays unhealthy past
// health.timeout fails the step with its last log lines, is removed, and a
// container it replaced is put back and started. Destroy stops and removes
// the container; a deployment the manifests no longer declare is removed too.
#ifndef FLEET_PROVIDERS_DEPLOYMENT_DEPLOYMENT_PROVIDER_H_
#define FLEET_PROVIDERS_DEPLOYMENT_DEPLOYMENT_PROVIDER_H_

#include <optional>

#include "providers/deployment/deployment_diff.h"
#include "providers/shared/serving/deployment_json.h"
#include "src/provider.h"

namespace fleet {

class DeploymentProvider : public Provider {
 public:
  std::string type() const override { return "deployment"; }
  Role role() const override { return Role::kServe; }
  std::vector<DesiredResource> Expand(const Manifest& m) const override;
  std::string ProbeScript(const DesiredResource& r, const NodeSpec& node) const override;
  ActualResource ParseProbe(const DesiredResource& r, const std::string& output,
                            const NodeFacts& facts) const override;
  PlanChange Diff(const DesiredResource& desired, const ActualResource& actual,
                  const ResourceRecord* record, const DiffContext& ctx) const override;
  PlanChange DiffDestroy(const DesiredResource& desired, const ActualResource& actual,
                         const ResourceRecord* record, const DiffContext& ctx) const override;
  PlanChange DiffOrphan(const ResourceRecord& record, const DiffContext& ctx) const override;
  std::vector<PlanChange> DiffUnrecorded(const std::string& node,
                                         const DiffContext& ctx) const override;
  Result<nlohmann::json> Adopt(const DesiredResource& desired, const ActualResource& actual,
                               const DiffContext& ctx, const StepContext* node) const override;
  Result<nlohmann::json> Apply(const PlanChange& change, const StepContext& ctx) const override;
  Status Undo(const PlanChange& change, const nlohmann::json& applied, const StepContext& ctx,
              bool* undone) const override;
};
}  // namespace fleet

#endif  // FLEET_PROVIDERS_DEPLOYMENT_DEPLOYMENT_PROVIDER_H_
