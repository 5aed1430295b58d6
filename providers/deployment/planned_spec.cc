#include "providers/deployment/planned_spec.h"

#include <optional>

#include "providers/deployment/row_probe.h"
#include "providers/shared/hub_cache.h"
#include "providers/shared/serving/deployment_json.h"
#include "providers/shared/serving/deployment_probe.h"

namespace fleet {
namespace {

// The rows of a {rows:...} recipe's tensors, read from the headers of the
// snapshot on the node (staged by now: the deployment depends on its model).
Result<TensorRowCounts> ReadRows(const StepContext& ctx, const RowSource& rows) {
  Result<SnapshotHeaders> h = ReadSnapshotHeaders(ctx.transport, rows.location);
  if (!h.ok()) return h.status();
  return CountTensorRows(*h, rows.tensors, rows.model);
}

}  // namespace

// `declared` with its {rows:...} placeholders filled from the rows its probe
// read on the node. Sets *error when they cannot be (no model, no such
// tensor), *note when the model is not on the node yet (the step reads them).
DesiredResource WithProbedRows(const DesiredResource& declared, const ActualResource& actual,
                               const DiffContext& ctx, std::string* error, std::string* note) {
  DeploymentWant want = declared.attributes.get<DeploymentWant>();
  if (want.rows.tensors.empty() || !actual.probed || !actual.error.empty() ||
      ctx.manifest == nullptr)
    return declared;
  std::string names;
  for (const std::string& t : want.rows.tensors) names += (names.empty() ? "" : ", ") + t;
  if (want.rows.model.empty()) {
    *error = "its recipe uses {rows:" + want.rows.tensors[0] +
             "}, but the deployment serves no model to read the tensor from";
    return declared;
  }
  const ContainerProbe p = actual.attributes.get<ContainerProbe>();
  if (!p.rows_error.empty()) {
    *error = p.rows_error + " (" + want.rows.location.repo + "@" + want.rows.location.revision +
             " on " + declared.node + ")";
    return declared;
  }
  if (p.rows_snapshot_missing) {
    *note = "rows of " + names + " ({rows:...}) are read from model " + want.rows.model +
            "'s safetensors headers when the step runs, once it is staged on " + declared.node;
    return declared;
  }
  Result<ContainerSpec> spec =
      RenderContainerSpec(*ctx.manifest, declared.name, declared.node,
                          want.shown.fabric ? &*want.shown.fabric : nullptr, &p.tensor_rows);
  if (!spec.ok()) {
    *error = spec.status().message();
    return declared;
  }
  want.shown = spec->Shown();
  DesiredResource filled = declared;
  filled.attributes = want;
  return filled;
}

// The spec the step runs: rendered again, and still the one the plan showed.
Result<ContainerSpec> SpecAsPlanned(const PlanChange& change, const StepContext& ctx,
                                    const std::string& name) {
  // The fabric facts the plan found (the probe's), not found again; a
  // {rows:...} recipe's rows read again on the node (a plan made before its
  // model was there showed the placeholders unfilled).
  const DeploymentWant planned = change.after.get<DeploymentWant>();
  const FabricValues* fabric = planned.shown.fabric ? &*planned.shown.fabric : nullptr;
  std::optional<TensorRowCounts> rows;
  if (!planned.rows.tensors.empty()) {
    Result<TensorRowCounts> read = ReadRows(ctx, planned.rows);
    if (!read.ok()) return read.status();
    rows = *read;
  }
  Result<ContainerSpec> spec =
      RenderContainerSpec(*ctx.manifest, name, ctx.node->name, fabric, rows ? &*rows : nullptr);
  if (!spec.ok()) return spec.status();
  std::string planned_hash = spec->hash;
  if (rows && spec->hash != planned.shown.spec) {
    Result<ContainerSpec> unfilled =
        RenderContainerSpec(*ctx.manifest, name, ctx.node->name, fabric);
    if (unfilled.ok()) planned_hash = unfilled->hash;
  }
  if (planned_hash != planned.shown.spec)
    return Result<ContainerSpec>::Error(
        "deployment " + name + " differs from the plan (the manifests changed since): plan again");
  return spec;
}

}  // namespace fleet
