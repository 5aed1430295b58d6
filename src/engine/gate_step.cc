#include "src/engine/gate_step.h"

#include <sstream>

#include "providers/gateway/gateway_config.h"
#include "providers/shared/serving/container_lifecycle.h"
#include "providers/shared/serving/deployment_json.h"
#include "providers/shared/serving/deployment_spec.h"
#include "providers/shared/serving/smoke_check.h"
#include "src/engine/bench_history.h"
#include "src/engine/gate_decision.h"
#include "src/openai_client.h"
#include "src/resource.h"
#include "state/state.h"

namespace fleet {
namespace {

const Provider* ProviderOf(const GateDeps& deps, const std::string& type) {
  for (const auto& p : *deps.providers)
    if (p->type() == type) return p.get();
  return nullptr;
}

// A step's context on `node` of manifest `m`, as the executor makes one
// (no record, no checkpoint: what the gate starts beside is not the
// deployment's record).
Result<StepContext> ContextOn(const GateDeps& deps, const Manifest& m, const std::string& node,
                              const StepContext& parent) {
  auto n = m.nodes.find(node);
  if (n == m.nodes.end()) return Status::Error("node " + node + " is not in the manifests");
  StepContext ctx;
  ctx.node = &n->second;
  ctx.manifest = &m;
  ctx.power = parent.power;
  ctx.hub = parent.hub;
  ctx.shared = parent.shared;
  ctx.node_transport = parent.node_transport;
  ctx.transport = deps.connections->Get(node);
  ctx.progress = [progress = parent.progress, node](const std::string& line) {
    if (progress) progress("[" + node + "] " + line);
  };
  if (Status s = ctx.transport->Connect(); !s.ok()) return s;
  return ctx;
}

// Every gateway of `m` made to route as `m` says (a reload, hitless).
Status Route(const GateDeps& deps, const Manifest& m, const StepContext& parent,
             const std::string& what) {
  const Provider* gw = ProviderOf(deps, "gateway");
  if (gw == nullptr) return Status::OK();
  for (const DesiredResource& r : gw->Expand(m)) {
    if (parent.progress) parent.progress("gateway " + r.name + " on " + r.node + ": " + what);
    PlanChange c;
    c.address = r.address;
    c.type = r.type;
    c.node = r.node;
    c.action = Action::kUpdate;
    c.after = r.attributes;
    c.detail = GatewayDetail{r.name, r.attributes.get<GatewayWant>().cli};
    Result<StepContext> ctx = ContextOn(deps, m, r.node, parent);
    if (!ctx.ok()) return ctx.status();
    Result<nlohmann::json> done = gw->Apply(c, *ctx);
    if (!done.ok()) return done.status().Prefixed("gateway " + r.name + " on " + r.node);
  }
  return Status::OK();
}

// The deployment's change on `node` of manifest `m` (the candidate's).
Result<PlanChange> CandidateChange(const GateDeps& deps, const Manifest& m, const PlanChange& c,
                                   const std::string& node) {
  const Provider* dp = ProviderOf(deps, "deployment");
  const std::string name = c.gate->deployment;
  for (const DesiredResource& r : dp->Expand(m)) {
    if (r.name != name || r.node != node) continue;
    PlanChange cand;
    cand.address = r.address;
    cand.type = r.type;
    cand.node = node;
    cand.action = Action::kCreate;
    cand.summary = "start the gate's candidate on " + node;
    cand.after = r.attributes;
    DeploymentDetail detail = c.detail.get<DeploymentDetail>();
    detail.keep_previous = false;
    cand.detail = detail;
    return cand;
  }
  return Status::Error("deployment " + name + " cannot be rendered on " + node);
}

// The serve of `name` on `node` as `m` renders it: its URL and model name.
Result<SmokeTarget> ServeTarget(const Manifest& m, const std::string& name, const std::string& node,
                                std::string* model) {
  Result<ContainerSpec> spec = RenderContainerSpec(m, name, node);
  if (!spec.ok()) return spec.status();
  SmokeTarget t = TargetFor(m, *spec);
  *model = t.served_model;
  if (model->empty()) {
    Result<std::vector<std::string>> models = ListServedModels(t.BaseUrl(), 30);
    if (models.ok() && !models->empty()) *model = models->front();
  }
  return t;
}

BenchSpec SpecOf(const ContainerShown& shown, const std::vector<std::string>& nodes,
                 const std::string& version) {
  BenchSpec s;
  s.image_ref = shown.image;
  if (shown.model) {
    const size_t at = shown.model->rfind('@');
    s.model_repo = shown.model->substr(0, at);
    if (at != std::string::npos) s.model_revision = shown.model->substr(at + 1);
  }
  s.spec_hash = shown.spec;
  s.nodes = nodes;
  s.engine_args = shown.command;
  s.fleet_version = version;
  return s;
}

// One bench run of the serve `target` (as `shown` runs it, on `node`).
BenchRecord Bench(const GateDeps& deps, const BenchPlan& plan, const PlanChange& c,
                  const SmokeTarget& target, const std::string& model, const std::string& node,
                  const ContainerShown& shown, const StepContext& parent) {
  BenchRecord rec;
  rec.time = NowRfc3339();
  rec.deployment = c.gate->deployment;
  rec.node = node;
  rec.profile = c.gate->profile;
  rec.model = model;
  rec.spec = SpecOf(shown, deps.manifest->deployments.at(rec.deployment).nodes, deps.version);
  rec.id = BenchRunId(rec.time, shown.spec);
  MeasureBench(plan, target.BaseUrl(), &rec, [&](const std::string& line) {
    if (parent.progress) parent.progress(line);
  });
  return rec;
}

Status GateEvent(const GateDeps& deps, const PlanChange& c, const std::string& outcome,
                 const std::string& run, const std::string& detail) {
  return deps.store->AppendEvent({{"time", NowRfc3339()},
                                  {"event", "gate"},
                                  {"address", c.address},
                                  {"outcome", outcome},
                                  {"detail", detail},
                                  {"deployment", c.gate->deployment},
                                  {"spec", c.after.get<DeploymentWant>().shown.spec},
                                  {"run", run}});
}

// The last good run; with none, the serving old spec benched now and marked
// good (the baseline an operator would have made by hand).
Result<std::optional<BenchRecord>> Baseline(const GateDeps& deps, const BenchPlan& plan,
                                            const PlanChange& c, const StepContext& ctx) {
  Result<BenchHistory> history = ReadBenchHistory(deps.store);
  if (!history.ok()) return history.status().Prefixed("the bench history");
  std::optional<BenchRecord> good = LastGoodRun(deps.root, c.gate->deployment, *history);
  if (good) return good;
  std::optional<DeploymentRecord> before = DeploymentRecordFrom(c.before);
  if (!before) return good;
  if (ctx.progress)
    ctx.progress("no good run of deployment." + c.gate->deployment +
                 " yet: benching the serving spec first (the baseline)");
  std::string model;
  Result<SmokeTarget> target = ServeTarget(*deps.manifest, c.gate->deployment, c.node, &model);
  if (!target.ok()) return target.status();
  BenchRecord base = Bench(deps, plan, c, *target, model, c.node, before->want.shown, ctx);
  int failed = 0;
  for (const BenchCell& cell : base.cells) failed += cell.failed;
  Status kept = KeepBenchRun(deps.store, deps.root, base, "gate baseline");
  if (!kept.ok()) return kept;
  if (failed > 0) return good;  // no baseline: DecideGate says so
  if (Status s = MarkBenchGood(deps.store, base, "gate baseline"); !s.ok()) return s;
  return std::optional<BenchRecord>(base);
}

// Shows the verdict's table (once: a refusal's error names only its
// reasons) and keeps the candidate's run and the verdict.
void Keep(const GateDeps& deps, const PlanChange& c, const BenchRecord& rec, const GateVerdict& v,
          const StepContext& ctx) {
  if (ctx.progress) {
    std::istringstream in(v.Render(c.gate->max_regression_pct));
    for (std::string line; std::getline(in, line);) ctx.progress("  " + line);
  }
  Status kept =
      KeepBenchRun(deps.store, deps.root, rec, v.promote ? "gate passed" : "gate refused");
  if (!kept.ok() && ctx.progress) ctx.progress("the gate's run was not kept: " + kept.message());
}

Status Promoted(const GateDeps& deps, const PlanChange& c, const BenchRecord& rec) {
  if (Status s = MarkBenchGood(deps.store, rec, "gate passed"); !s.ok()) return s;
  return GateEvent(deps, c, "promoted", rec.id, "within tolerance of the last good run");
}

// The refusal's error: what became of the serve and its first reason; the
// comparison with every reason was shown as the step's progress (Keep),
// and `fleet report --bench` shows it again.
Result<nlohmann::json> Refused(const GateDeps& deps, const PlanChange& c, const BenchRecord& rec,
                               const GateVerdict& v, const std::string& what_now) {
  std::string why;
  for (const std::string& r : v.reasons) why += (why.empty() ? "" : "; ") + r;
  (void)GateEvent(deps, c, "refused", rec.id, why);
  std::string first;
  if (!v.reasons.empty()) {
    first = ": " + v.reasons.front();
    if (v.reasons.size() > 1)
      first += " (and " + std::to_string(v.reasons.size() - 1) + " more, in the comparison above)";
  }
  return Status::Error("the gate refused the new spec (" + rec.id + "): " + what_now + first);
}

Result<nlohmann::json> Beside(const GateDeps& deps, const PlanChange& c, const StepContext& ctx,
                              const Provider& dp, const BenchPlan& plan,
                              const std::optional<BenchRecord>& good) {
  const std::string f = c.gate->candidate;
  Manifest beside = *deps.manifest;
  beside.deployments.at(c.gate->deployment).nodes = {f};
  Result<PlanChange> cand = CandidateChange(deps, beside, c, f);
  if (!cand.ok()) return cand.status();
  Result<StepContext> fctx = ContextOn(deps, beside, f, ctx);
  if (!fctx.ok()) return fctx.status();
  const DeploymentWant want = cand->after.get<DeploymentWant>();
  auto remove_candidate = [&]() {
    return RemoveContainer(*fctx, fctx->node->container_cli, want.shown.container);
  };
  if (ctx.progress) ctx.progress("gate: starting the new spec beside the old one, on " + f);
  Result<nlohmann::json> started = dp.Apply(*cand, *fctx);
  if (!started.ok()) {
    (void)remove_candidate();
    (void)GateEvent(deps, c, "refused", "",
                    "the new spec did not start: " + started.status().message());
    return started.status().Prefixed("the gate's candidate on " + f +
                                     " did not serve; the old serve "
                                     "keeps the route");
  }
  std::string model;
  Result<SmokeTarget> target = ServeTarget(beside, c.gate->deployment, f, &model);
  if (!target.ok()) {
    (void)remove_candidate();
    return target.status();
  }
  const BenchRecord rec = Bench(deps, plan, c, *target, model, f, want.shown, ctx);
  const GateVerdict v = DecideGate(good, rec, *c.gate);
  Keep(deps, c, rec, v, ctx);
  if (!v.promote) {
    Status removed = remove_candidate();
    return Refused(
        deps, c, rec, v,
        "the candidate on " + f +
            (removed.ok() ? " is removed" : " could not be removed: " + removed.message()) +
            ", the route is unchanged and the old serve keeps serving");
  }
  // Promoted: the route to the candidate while the declared node is
  // replaced, then back.
  if (Status s = Route(deps, beside, ctx, "route " + model + " to the candidate on " + f);
      !s.ok()) {
    (void)Route(deps, *deps.manifest, ctx, "route back");
    (void)remove_candidate();
    return s;
  }
  Result<nlohmann::json> replaced = dp.Apply(c, ctx);
  Status back = Route(deps, *deps.manifest, ctx, "route " + model + " back to " + c.node);
  Status removed = remove_candidate();
  if (!replaced.ok()) return replaced.status().Prefixed("the gate passed, but " + c.node);
  if (!back.ok()) return back;
  if (!removed.ok() && ctx.progress)
    ctx.progress("the candidate on " + f + " was not removed: " + removed.message());
  if (Status s = Promoted(deps, c, rec); !s.ok() && ctx.progress)
    ctx.progress("the good mark was not kept: " + s.message());
  if (ctx.progress) ctx.progress("gate passed: " + rec.id + " marked good");
  return replaced;
}

Result<nlohmann::json> InPlace(const GateDeps& deps, const PlanChange& c, const StepContext& ctx,
                               const Provider& dp, const BenchPlan& plan,
                               const std::optional<BenchRecord>& good) {
  PlanChange kept = c;
  DeploymentDetail detail = c.detail.get<DeploymentDetail>();
  detail.keep_previous = true;
  kept.detail = detail;
  Result<ContainerSpec> spec = RenderContainerSpec(*deps.manifest, c.gate->deployment, c.node);
  if (!spec.ok()) return spec.status();
  if (ctx.progress)
    ctx.progress("gate: no free node: the new spec starts in place, the old container kept");
  Result<nlohmann::json> replaced = dp.Apply(kept, ctx);
  if (!replaced.ok()) return replaced;  // the old one is back (ReplaceContainer)
  std::string model;
  Result<SmokeTarget> target = ServeTarget(*deps.manifest, c.gate->deployment, c.node, &model);
  if (!target.ok()) return target.status();
  const BenchRecord rec =
      Bench(deps, plan, c, *target, model, c.node, c.after.get<DeploymentWant>().shown, ctx);
  const GateVerdict v = DecideGate(good, rec, *c.gate);
  Keep(deps, c, rec, v, ctx);
  if (!v.promote) {
    Status restored = RestorePrevious(ctx, *spec);
    return Refused(deps, c, rec, v,
                   restored.ok() ? "the old container is back and serving"
                                 : "putting the old container back failed: " + restored.message());
  }
  if (Status s = RemovePrevious(ctx, *spec); !s.ok() && ctx.progress)
    ctx.progress("the old container was not removed: " + s.message());
  if (Status s = Promoted(deps, c, rec); !s.ok() && ctx.progress)
    ctx.progress("the good mark was not kept: " + s.message());
  if (ctx.progress) ctx.progress("gate passed: " + rec.id + " marked good");
  return replaced;
}

}  // namespace

Result<nlohmann::json> RunGatedStep(const GateDeps& deps, const PlanChange& c,
                                    const StepContext& ctx) {
  const Provider* dp = ProviderOf(deps, "deployment");
  if (dp == nullptr || !c.gate) return Status::Error("no gate for " + c.address);
  Result<BenchPlan> plan = PrepareBench(deps.root, c.gate->profile, true);
  if (!plan.ok()) return plan.status().Prefixed("the gate's profile");
  Result<std::optional<BenchRecord>> good = Baseline(deps, *plan, c, ctx);
  if (!good.ok()) return good.status().Prefixed("the gate's baseline");
  return c.gate->candidate.empty() ? InPlace(deps, c, ctx, *dp, *plan, *good)
                                   : Beside(deps, c, ctx, *dp, *plan, *good);
}

}  // namespace fleet
