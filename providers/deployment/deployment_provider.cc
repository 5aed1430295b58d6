#include "providers/deployment/deployment_provider.h"

#include <set>

#include "providers/deployment/deployment_fabric.h"
#include "providers/deployment/group_restart.h"
#include "providers/deployment/planned_spec.h"
#include "providers/deployment/row_probe.h"
#include "providers/shared/serving/container_lifecycle.h"
#include "providers/shared/serving/deployment_json.h"
#include "providers/shared/serving/deployment_probe.h"
#include "providers/shared/serving/deployment_spec.h"
#include "providers/shared/serving/gpu_request.h"
#include "state/state.h"

namespace fleet {
namespace {

std::string ModelAddress(const Manifest& m, const std::string& model, const std::string& node) {
  auto it = m.models.find(model);
  if (it == m.models.end()) return "";
  const std::string& store = it->second.store;
  return ResourceAddress("model", model, store.empty() || store == "local" ? node : store);
}

}  // namespace

std::vector<DesiredResource> DeploymentProvider::Expand(const Manifest& m) const {
  std::vector<DesiredResource> out;
  for (const auto& [name, d] : m.deployments) {
    for (const std::string& node : d.nodes) {
      // Before the probe only declared fabric endpoints are known: Diff
      // renders a deployment that uses the fabric again with the probed ones.
      Result<ContainerSpec> spec = RenderWithFabric(m, name, node, nullptr);
      if (!spec.ok()) spec = RenderContainerSpec(m, name, node);
      if (!spec.ok()) continue;  // the loader reports what is missing
      DesiredResource r;
      r.address = ResourceAddress("deployment", name, node);
      r.type = "deployment";
      r.name = name;
      r.node = node;
      DeploymentWant want;
      want.shown = spec->Shown();
      want.cli = spec->cli;
      want.health_timeout_s = spec->health_timeout_s;
      want.gpu_memory_bytes = d.gpu_memory_bytes;
      want.rows.tensors = RowPlaceholderTensors(d.recipe);
      if (!want.rows.tensors.empty()) {
        want.rows.model = d.model;
        want.rows.location = {spec->model_cache, spec->model_repo, spec->model_revision};
      }
      r.attributes = want;
      r.depends_on = {NodeAddress(node), "display_ram." + node,
                      ResourceAddress("image", d.image, node)};
      if (!d.model.empty()) r.depends_on.push_back(ModelAddress(m, d.model, node));
      // The head of an engine across nodes starts after its workers: its
      // health needs them all.
      if (spec->rank == 0 && spec->nnodes > 1)
        for (size_t i = 1; i < d.nodes.size(); ++i)
          r.depends_on.push_back(ResourceAddress("deployment", name, d.nodes[i]));
      r.loc = d.loc;
      out.push_back(std::move(r));
    }
  }
  return out;
}

std::string DeploymentProvider::ProbeScript(const DesiredResource& r, const NodeSpec& node) const {
  const DeploymentWant want = r.attributes.get<DeploymentWant>();
  ContainerSpec spec;
  spec.cli = node.container_cli;
  spec.container = want.shown.container;
  spec.port = want.shown.port;
  spec.gpus = want.shown.gpus;
  // The plan's "http://<host>:<port><path>", split again ("": a worker).
  const std::string& health = want.shown.health;
  if (health.empty()) {
    spec.rank = 1;
    return WithRowsProbe(ContainerProbeScript(spec), want.rows);
  }
  SetHealthFromUrl(health, &spec);
  return WithRowsProbe(ContainerProbeScript(spec), want.rows);
}

ActualResource DeploymentProvider::ParseProbe(const DesiredResource& r, const std::string& output,
                                              const NodeFacts&) const {
  ActualResource a;
  a.probed = true;
  const DeploymentWant want = r.attributes.get<DeploymentWant>();
  ContainerProbe rows;
  const std::string container_output = ParseRowsProbe(output, want.rows, &rows);
  ContainerProbe p = ParseContainerProbe(container_output);
  p.tensor_rows = rows.tensor_rows;
  p.rows_snapshot_missing = rows.rows_snapshot_missing;
  p.rows_error = rows.rows_error;
  a.exists = p.exists;
  RecordGpuSupport(want, container_output, &p);
  a.attributes = p;
  if (!p.cli_found)
    a.error = "container_cli '" + want.cli + "' not found on the node's PATH";
  else if (!p.error.empty())
    a.error = "cannot inspect container " + want.shown.container + ": " + p.error;
  return a;
}

using deployment_internal::CheckEnvFrom;
using deployment_internal::DeclaredOn;
using deployment_internal::DeploymentOf;
using deployment_internal::DiffContainer;
using deployment_internal::NoteUnrecorded;
using deployment_internal::Unrecorded;
using deployment_internal::WithFabricFacts;

PlanChange DeploymentProvider::Diff(const DesiredResource& declared, const ActualResource& actual,
                                    const ResourceRecord* record, const DiffContext& ctx) const {
  Result<DesiredResource> with_fabric = WithFabricFacts(declared, ctx);
  if (!with_fabric.ok()) {
    PlanChange c = ChangeFor(declared);
    c.after = declared.attributes;
    c.detail = DeploymentDetail{declared.name, "", ""};
    c.error = declared.address + ": " + with_fabric.status().message();
    return c;
  }
  std::string rows_error, rows_note;
  const DesiredResource desired =
      WithProbedRows(*with_fabric, actual, ctx, &rows_error, &rows_note);
  if (!rows_error.empty()) {
    PlanChange c = ChangeFor(desired);
    c.after = desired.attributes;
    c.detail = DeploymentDetail{desired.name, "", ""};
    c.error = desired.address + ": " + rows_error;
    return c;
  }
  PlanChange c = DiffContainer(desired, actual, record, ctx);
  if (!rows_note.empty()) c.reasons.push_back(rows_note);
  if (c.error.empty() && actual.probed) RestartWithGroup(desired, ctx, &c);
  if (c.error.empty() && (c.action == Action::kCreate || c.action == Action::kReplace))
    c.error = GpuPlanError(desired, actual);
  CheckEnvFrom(desired, desired.attributes.get<DeploymentWant>(), &c);
  NoteUnrecorded(desired, actual, record, ctx, &c);
  return c;
}

PlanChange DeploymentProvider::DiffDestroy(const DesiredResource& desired,
                                           const ActualResource& actual,
                                           const ResourceRecord* record, const DiffContext&) const {
  PlanChange c = ChangeFor(desired);
  const std::string container = desired.attributes.get<DeploymentWant>().shown.container;
  c.detail = DeploymentDetail{desired.name, "", ""};
  if (actual.probed && !actual.exists) {
    if (record != nullptr) {  // gone already: forget it
      c.action = Action::kDelete;
      c.summary = "forget " + container + " (not on the node)";
      c.before = record->attributes;
    }
    return c;
  }
  c.action = Action::kDelete;
  c.summary = "stop and remove " + container;
  c.before = record ? record->attributes : desired.attributes;
  c.reasons.push_back(actual.probed ? "fleet destroy stops every serve"
                                    : "node not reachable now: checked again at apply");
  return c;
}

PlanChange DeploymentProvider::DiffOrphan(const ResourceRecord& record,
                                          const DiffContext& ctx) const {
  PlanChange c = ForgetRecord(record);
  const DeploymentRecord rec = record.attributes.get<DeploymentRecord>();
  const std::string& container = rec.want.shown.container;
  if (container.empty()) return c;
  if (ctx.manifest != nullptr && !ctx.manifest->nodes.count(record.node)) {
    // fleet cannot reach a node the manifests dropped: forget the serve
    // and say what may still run there.
    c.reasons.push_back("node " + record.node + " is not in the manifests any more: " + container +
                        " is not stopped there (stop it by hand if it still runs)");
    return c;
  }
  c.action = Action::kDelete;
  c.summary = "stop and remove " + container;
  c.reasons = {"the manifests no longer declare it"};
  c.before = record.attributes;
  c.detail = DeploymentDetail{"", container, rec.want.cli};
  return c;
}

namespace {

// The change for a running fleet serve `container` on `node` that neither
// the manifests (there) nor the state know: a note, or with --purge its
// removal.
PlanChange UnrecordedServe(const std::string& node, const std::string& container,
                           const DiffContext& ctx) {
  PlanChange c;
  c.address = ResourceAddress("deployment", DeploymentOf(container), node);
  c.type = "deployment";
  c.node = node;
  if (!ctx.purge) {
    c.reasons.push_back(UnrecordedServeNote(c.address, node, container, false));
    return c;
  }
  c.action = Action::kDelete;
  c.summary = "stop and remove " + container;
  c.reasons = {"running on " + node + " but not in this state, and the manifests do not declare " +
               "it there: --purge removes it"};
  c.detail = DeploymentDetail{"", container, ctx.manifest->nodes.at(node).container_cli};
  return c;
}

}  // namespace

std::vector<PlanChange> DeploymentProvider::DiffUnrecorded(const std::string& node,
                                                           const DiffContext& ctx) const {
  std::vector<PlanChange> out;
  if (ctx.all_actual == nullptr || ctx.recorded == nullptr || ctx.manifest == nullptr) return out;
  // Every fleet serve running on the node (the node probe lists them), and
  // those the probes of its deployments saw where a port was busy.
  std::vector<std::string> serving = ctx.facts.fleet_serves;
  for (const auto& [name, d] : ctx.manifest->deployments) {
    if (!DeclaredOn(*ctx.manifest, name, node)) continue;
    auto it = ctx.all_actual->find(ResourceAddress("deployment", name, node));
    if (it == ctx.all_actual->end() || !it->second.probed || !it->second.error.empty()) continue;
    for (const std::string& c : it->second.attributes.get<ContainerProbe>().serving)
      serving.push_back(c);
  }
  std::set<std::string> seen;
  for (const std::string& container : serving) {
    const std::string deployment = DeploymentOf(container);
    if (deployment.empty() || DeclaredOn(*ctx.manifest, deployment, node)) continue;
    if (!Unrecorded(ctx, ResourceAddress("deployment", deployment, node))) continue;
    if (seen.insert(container).second) out.push_back(UnrecordedServe(node, container, ctx));
  }
  return out;
}

Result<nlohmann::json> DeploymentProvider::Adopt(const DesiredResource& declared,
                                                 const ActualResource& actual,
                                                 const DiffContext& ctx, const StepContext*) const {
  using R = Result<nlohmann::json>;
  Result<DesiredResource> with_fabric = deployment_internal::WithFabricFacts(declared, ctx);
  if (!with_fabric.ok()) return with_fabric.status();
  const DesiredResource& desired = *with_fabric;
  const DeploymentWant want = desired.attributes.get<DeploymentWant>();
  const std::string& container = want.shown.container;
  if (!actual.probed) return R::Error(desired.node + " could not be probed");
  if (!actual.error.empty()) return R::Error(actual.error);
  const ContainerProbe found = actual.attributes.get<ContainerProbe>();
  if (!found.exists) return R::Error("no container " + container + " on " + desired.node);
  DiffContext alone = ctx;
  alone.recorded = nullptr;  // the diff of a record that would exist
  const PlanChange c = deployment_internal::DiffContainer(desired, actual, nullptr, alone);
  if (!c.error.empty()) return R::Error(c.error);
  if (c.action != Action::kNoop) {
    std::string why = container + " on " + desired.node +
                      " does not match the manifests (the plan would " + c.summary + ")";
    for (const std::string& r : c.reasons) why += ": " + r;
    return R::Error(why);
  }
  return nlohmann::json(DeploymentRecord{want, found.id, found.image});
}

namespace {

// Stops and removes the container a delete names (and a replaced one left
// aside), then drops the record.
Result<nlohmann::json> RemoveDeployment(const PlanChange& change, const StepContext& ctx) {
  const DeploymentDetail detail = change.detail.get<DeploymentDetail>();
  std::string container = detail.container;
  std::string cli = detail.cli;
  if (container.empty()) {
    if (auto before = DeploymentRecordFrom(change.before)) container = before->want.shown.container;
  }
  if (cli.empty()) cli = ctx.node->container_cli;
  if (container.empty()) return nlohmann::json();
  Status s = RemoveContainer(ctx, cli, container);
  if (s.ok()) s = RemoveContainer(ctx, cli, container + "-previous");
  if (!s.ok()) return s;
  return nlohmann::json();  // removed: drop the record
}

}  // namespace

Result<nlohmann::json> DeploymentProvider::Apply(const PlanChange& change,
                                                 const StepContext& ctx) const {
  if (change.action == Action::kDelete) return RemoveDeployment(change, ctx);
  Result<ContainerSpec> spec =
      SpecAsPlanned(change, ctx, change.detail.get<DeploymentDetail>().name);
  if (!spec.ok()) return spec.status();
  Result<std::string> image_id = StagedImage(ctx, *spec);
  if (!image_id.ok()) return image_id.status();
  if (spec->rank > 0 && spec->nnodes > 1) {
    Status stopped = StopOldHead(ctx, *spec);
    if (!stopped.ok()) return stopped;
  }
  // What is there now: the same spec stopped (start it), another (replace it).
  Result<ExistingContainer> existing = InspectExisting(ctx, *spec);
  if (!existing.ok()) return existing.status();
  const bool same =
      existing->exists && existing->spec == spec->hash && change.action != Action::kReplace;
  // A serve the state does not know yet is recorded before it starts (as
  // display RAM records before its reload): if fleet dies between the start
  // and the end of the step, the state still owns the container, so a later
  // plan neither mistakes it for someone else's nor leaves it running when
  // the manifests drop it (tests/faults/kill9.sh found it lost). If the step
  // fails instead, the record names no container and the next plan starts it.
  DeploymentRecord record{change.after.get<DeploymentWant>(), "", *image_id};  // no id yet
  if (ctx.record == nullptr && ctx.checkpoint) {
    Status c = ctx.checkpoint(nlohmann::json(record));
    if (!c.ok()) return c;
  }
  // The plan found the serve fits only once the page cache is dropped.
  if (change.detail.is_object() && change.detail.get<DeploymentDetail>().drop_page_cache) {
    Status dropped = DropPageCache(ctx);
    if (!dropped.ok()) return dropped;
  }
  const bool keep_previous =
      change.detail.is_object() && change.detail.get<DeploymentDetail>().keep_previous;
  Status s = same ? StartExisting(ctx, *spec)
                  : ReplaceContainer(ctx, *spec, *existing, *image_id, keep_previous);
  if (!s.ok()) return s;
  // The state record: what the plan said it would run, and what it runs as.
  Result<std::string> container_id = ContainerId(ctx, *spec);
  if (!container_id.ok()) {
    // What now runs is this spec (a replacement has already removed what it
    // replaced): the state says so, with no id, before the step fails.
    if (ctx.checkpoint) (void)ctx.checkpoint(nlohmann::json(record));
    return container_id.status();
  }
  record.container_id = *container_id;
  if (!record.want.rows.tensors.empty())
    record.want.shown = spec->Shown();  // with the rows read now, if the plan could not
  return nlohmann::json(record);
}

Status DeploymentProvider::Undo(const PlanChange& change, const nlohmann::json& applied,
                                const StepContext& ctx, bool* undone) const {
  *undone = false;
  std::optional<DeploymentRecord> rec = DeploymentRecordFrom(applied);
  if (change.action != Action::kCreate || !rec) return Status::OK();
  Status s = RemoveContainer(ctx, rec->want.cli.empty() ? ctx.node->container_cli : rec->want.cli,
                             rec->want.shown.container);
  if (s.ok()) *undone = true;
  return s;
}

}  // namespace fleet
