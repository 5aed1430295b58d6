#include "providers/deployment/group_restart.h"

#include "providers/deployment/deployment_fabric.h"
#include "providers/shared/serving/deployment_json.h"
#include "providers/shared/serving/deployment_probe.h"
#include "providers/shared/serving/deployment_spec.h"
#include "src/shell_quote.h"

namespace fleet {

namespace {

// Why the rank on `node` will not be running its declared spec after this
// plan without a restart ("" when it runs it, or when it cannot be told).
std::string RankProblem(const Manifest& m, const std::string& name, const std::string& node,
                        const DiffContext& ctx) {
  auto it = ctx.all_actual->find(ResourceAddress("deployment", name, node));
  if (it == ctx.all_actual->end() || !it->second.probed || !it->second.error.empty()) return "";
  const ContainerProbe p = it->second.attributes.get<ContainerProbe>();
  // A {rows:...} recipe: that rank's rows, as its own probe read them.
  Result<ContainerSpec> spec = RenderWithFabric(m, name, node, ctx.all_facts,
                                                p.tensor_rows.empty() ? nullptr : &p.tensor_rows);
  if (!spec.ok()) return "";
  if (!p.exists) return "has no container " + spec->container;
  if (p.spec != spec->hash) return "is replaced (its spec changed)";
  if (p.state != "running")
    return "is " + p.state + " (exit code " + std::to_string(p.exit_code) + ")";
  return "";
}

}  // namespace

void RestartWithGroup(const DesiredResource& desired, const DiffContext& ctx, PlanChange* c) {
  if (c->action == Action::kCreate || c->action == Action::kReplace) return;
  if (ctx.manifest == nullptr || ctx.all_actual == nullptr) return;
  auto d = ctx.manifest->deployments.find(desired.name);
  if (d == ctx.manifest->deployments.end() || d->second.nodes.size() < 2 ||
      !IsGroupRecipe(d->second.recipe))
    return;
  for (const std::string& node : d->second.nodes) {
    if (node == desired.node) continue;
    const std::string why = RankProblem(*ctx.manifest, desired.name, node, ctx);
    if (why.empty()) continue;
    c->action = Action::kReplace;
    c->summary =
        "restart " + desired.attributes.get<DeploymentWant>().shown.container + " with its group";
    c->reasons.push_back("the rank on " + node + " " + why + ": the ranks of " + desired.name +
                         " restart together (workers first, the head last)");
    return;
  }
}

// A worker's step in a group restart: the head's old container stops before
// any worker starts, so that no old head talks to new workers; the head's
// own step, which waits for every worker, starts it last.
Status StopOldHead(const StepContext& ctx, const ContainerSpec& spec) {
  auto d = ctx.manifest->deployments.find(spec.deployment);
  if (d == ctx.manifest->deployments.end() || d->second.nodes.empty() || !ctx.node_transport)
    return Status::OK();
  const std::string& head = d->second.nodes[0];
  Transport* t = ctx.node_transport(head);
  if (t == nullptr)
    return Status::Error("no connection to " + head + ", the head of " + spec.deployment);
  Status s = t->Connect();
  if (!s.ok()) return s;
  const std::string& cli = ctx.manifest->nodes.at(head).container_cli;
  const std::string running =
      ShellCommand({cli, "container", "inspect", "--format", "{{.State.Status}}", spec.container});
  if (ctx.progress)
    ctx.progress("stopping the head's " + spec.container + " on " + head + " first");
  Result<CommandResult> r =
      t->Run("if [ \"$(" + running + " 2>/dev/null)\" = running ]; then " +
             ShellCommand({cli, "stop", "-t", "30", spec.container}) + " >/dev/null; fi");
  if (!r.ok()) return r.status();
  if (r->exit_code != 0)
    return Status::Error("on " + head + ": stopping the head " + spec.container + " exited " +
                         std::to_string(r->exit_code) + ": " + r->err);
  return Status::OK();
}

}  // namespace fleet
