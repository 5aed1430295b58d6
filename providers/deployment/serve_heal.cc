#include "providers/deployment/serve_heal.h"

#include <cstdlib>

#include "providers/deployment/group_restart.h"
#include "providers/deployment/planned_spec.h"
#include "providers/shared/serving/container_lifecycle.h"
#include "src/shell_quote.h"

namespace fleet {
namespace {

// What the record says of the container, enough to find it, wait for it
// and check it: the recorded spec when the manifests no longer render it.
ContainerSpec SpecFromRecord(const StepContext& ctx, const std::string& name,
                             const DeploymentWant& want) {
  ContainerSpec s;
  s.deployment = name;
  s.node = ctx.node->name;
  s.container = want.shown.container;
  s.cli = want.cli.empty() ? ctx.node->container_cli : want.cli;
  s.image_ref = want.shown.image;
  s.port = want.shown.port;
  s.health_timeout_s = want.health_timeout_s;
  s.hash = want.shown.spec;
  if (want.shown.rank) {  // "<rank> of <nnodes>"
    s.rank = std::atoi(want.shown.rank->c_str());
    const size_t of = want.shown.rank->find(" of ");
    if (of != std::string::npos) s.nnodes = std::atoi(want.shown.rank->c_str() + of + 4);
  }
  SetHealthFromUrl(want.shown.health, &s);  // "" for a worker
  return s;
}

// Stops the container when it runs: a hung or garbling engine gets a fresh
// start, not a wait on what it answers now.
Status StopIfRunning(const StepContext& ctx, const ContainerSpec& spec) {
  Result<CommandResult> state = ctx.transport->Run(ShellCommand(
      {spec.cli, "container", "inspect", "--format", "{{.State.Status}}", spec.container}));
  if (!state.ok()) return state.status();
  if (state->out.rfind("running", 0) != 0) return Status::OK();
  if (ctx.progress) ctx.progress("stopping " + spec.container + " to start it again");
  return RunOnNode(ctx,
                   ShellCommand({spec.cli, "stop", "-t", "30", spec.container}) + " >/dev/null")
      .status();
}

}  // namespace

Result<DeploymentRecord> HealServe(const StepContext& ctx, const std::string& name,
                                   const DeploymentRecord& recorded, bool drop_page_cache) {
  using R = Result<DeploymentRecord>;
  PlanChange as_recorded;
  as_recorded.after = recorded.want;
  Result<ContainerSpec> declared = SpecAsPlanned(as_recorded, ctx, name);
  ContainerSpec spec = declared.ok() ? *declared : SpecFromRecord(ctx, name, recorded.want);
  if (!declared.ok()) {
    // The record holds no env values: the manifests' mask the container's
    // log lines in an error (the values a rotated secret had are not known).
    Result<ContainerSpec> now = RenderContainerSpec(*ctx.manifest, name, ctx.node->name);
    if (now.ok()) {
      spec.env = now->env;
      spec.env_from = now->env_from;
    }
  }
  if (spec.rank > 0 && spec.nnodes > 1) {
    Status stopped = StopOldHead(ctx, spec);
    if (!stopped.ok()) return stopped;
  }
  Result<ExistingContainer> existing = InspectExisting(ctx, spec);
  if (!existing.ok()) return existing.status();
  if (drop_page_cache) {
    Status dropped = DropPageCache(ctx);
    if (!dropped.ok()) return dropped;
  }
  Status s;
  if (existing->exists && existing->spec == recorded.want.shown.spec) {
    s = StopIfRunning(ctx, spec);
    if (s.ok()) s = StartExisting(ctx, spec);
  } else if (declared.ok()) {
    Result<std::string> image_id = StagedImage(ctx, spec);
    if (!image_id.ok()) return image_id.status();
    s = ReplaceContainer(ctx, spec, *existing, *image_id);
  } else {
    return R::Error("container " + spec.container + " is " +
                    (existing->exists ? "running another spec" : "gone") +
                    ", and the manifests no longer render the recorded spec " +
                    recorded.want.shown.spec.substr(0, 12) + " (" + declared.status().message() +
                    "): not healed; a reviewed apply starts what the manifests declare");
  }
  if (!s.ok()) return s;
  Result<std::string> id = ContainerId(ctx, spec);
  if (!id.ok()) return id.status();
  DeploymentRecord healed = recorded;
  healed.container_id = *id;
  return healed;
}

}  // namespace fleet
