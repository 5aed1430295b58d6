#include "providers/deployment/deployment_diff.h"

#include <algorithm>
#include <cstdlib>

#include "providers/deployment/deployment_fabric.h"
#include "providers/deployment/serve_per_node.h"
#include "providers/shared/display_ram_json.h"
#include "providers/shared/engine_check.h"
#include "providers/shared/gpu_facts.h"
#include "providers/shared/image_probe.h"
#include "providers/shared/image_ref.h"
#include "providers/shared/serving/deployment_probe.h"
#include "providers/shared/serving/gpu_request.h"
#include "providers/shared/serving/serve_health.h"
#include "src/shell_quote.h"
#include "state/state.h"

namespace fleet {

namespace deployment_internal {

bool DeclaredOn(const Manifest& m, const std::string& name, const std::string& node) {
  auto d = m.deployments.find(name);
  return d != m.deployments.end() &&
         std::find(d->second.nodes.begin(), d->second.nodes.end(), node) != d->second.nodes.end();
}

// The deployment a fleet serving container is named for ("" when the name
// is not fleet's).
std::string DeploymentOf(const std::string& container) {
  const std::string prefix = ContainerName("");
  return container.rfind(prefix, 0) == 0 ? container.substr(prefix.size()) : "";
}

bool Unrecorded(const DiffContext& ctx, const std::string& address) {
  return ctx.recorded != nullptr && !ctx.recorded->count(address);
}

}  // namespace deployment_internal

using deployment_internal::DeclaredOn;
using deployment_internal::DeploymentOf;
using deployment_internal::Unrecorded;

namespace {

// The containers a display RAM change planned on `node` stops first.
bool StoppedByDisplayRam(const DiffContext& ctx, const std::string& node,
                         const std::string& container) {
  if (ctx.planned == nullptr) return false;
  for (const PlanChange& c : *ctx.planned) {
    if (c.address != "display_ram." + node || c.action == Action::kNoop) continue;
    for (const std::string& n : ContainersStoppedBy(c))
      if (n == container) return true;
  }
  return false;
}

// The memory budget check for a serve about to start: an error when the
// node's free GPU memory is known and short, a note when it is unknown.
void CheckBudget(const DesiredResource& desired, const DeploymentWant& want, const DiffContext& ctx,
                 PlanChange* c) {
  const uint64_t need = want.gpu_memory_bytes;
  if (need == 0) return;
  GpuFacts facts;
  if (!GpuFactsFromJson(ctx.facts.gpu, &facts)) {
    c->reasons.push_back("gpu_memory not checked: no GPU facts for " + desired.node);
    return;
  }
  const BudgetAnswer b = CheckMemoryBudget(facts, need);
  if (b.fits_after_drop) {
    // Unified memory full of page cache (a model just staged): the start
    // fits once the cache is dropped, which the apply does first, with
    // `sudo -n` for exactly that command (checked here, not mid-apply).
    const std::string why = DropCachesSudoRefusal(desired.node, facts);
    if (!why.empty()) {
      c->error = desired.address + ": gpu_memory fits on " + desired.node +
                 " only once the page cache is dropped (" + b.explanation + "), but " + why;
      return;
    }
    c->reasons.push_back("gpu_memory fits once the page cache is dropped: " + b.explanation +
                         "; the start drops it first (sync; sudo -n " +
                         ShellCommand(DropCachesArgv()) + ")");
    DeploymentDetail detail =
        c->detail.is_object() ? c->detail.get<DeploymentDetail>() : DeploymentDetail{};
    detail.drop_page_cache = true;
    c->detail = detail;
    return;
  }
  if (b.known && !b.fits)
    c->error =
        desired.address + ": gpu_memory does not fit on " + desired.node + ": " + b.explanation;
  else
    c->reasons.push_back(std::string(b.known ? "gpu_memory fits: " : "gpu_memory not checked: ") +
                         b.explanation);
}

// A fleet serving container on `node` that the manifests no longer declare
// there, among `serving` (what runs with the fleet.deployment label): the
// plan removes it (DiffOrphan, or DiffUnrecorded with --purge), and it may
// hold the port a new deployment wants (a renamed deployment). "" when none.
std::string UndeclaredServe(const DiffContext& ctx, const std::string& node,
                            const std::vector<std::string>& serving) {
  if (ctx.manifest == nullptr) return "";
  for (const std::string& name : serving) {
    const std::string deployment = DeploymentOf(name);
    if (!deployment.empty() && !DeclaredOn(*ctx.manifest, deployment, node)) return name;
  }
  return "";
}

}  // namespace

std::string UnrecordedServeNote(const std::string& address, const std::string& node,
                                const std::string& container, bool declared) {
  const std::string head =
      "running on " + node + " (container " + container + ") but not in this state";
  if (declared)
    return head + ": `fleet state adopt " + address + "` takes it over (it matches " +
           "the manifests)";
  return head + ", and the manifests do not declare it on " + node +
         ": `fleet apply --purge` stops and removes it (or declare it there, and `fleet state " +
         "adopt " + address + "` takes it over if it matches)";
}

namespace {

// A port something else listens on: an error, unless an undeclared fleet
// serve that this plan removes first holds it. A serve the state does not
// know is removed only with --purge: else the error says what it is and
// what to do.
void CheckPort(const DesiredResource& desired, const DeploymentWant& want, const DiffContext& ctx,
               const std::vector<std::string>& serving, PlanChange* c) {
  const std::string port = std::to_string(want.shown.port);
  const std::string holder = UndeclaredServe(ctx, desired.node, serving);
  if (!holder.empty()) {
    const std::string address = ResourceAddress("deployment", DeploymentOf(holder), desired.node);
    const bool unrecorded = Unrecorded(ctx, address);
    if (unrecorded && !ctx.purge) {
      c->error = desired.address + ": port " + port + " on " + desired.node + " is held by " +
                 address + ", " + UnrecordedServeNote(address, desired.node, holder, false);
      return;
    }
    c->depends_on.push_back(address);
    c->reasons.push_back(
        "port " + port + " is in use, by " + holder + " as it seems: " +
        (unrecorded ? "this state does not know it, and --purge removes " + address + " first"
                    : "the manifests no longer declare it, and " + address + " is removed first"));
    return;
  }
  c->error = desired.address + ": port " + port + " on " + desired.node +
             " is already in use by a process that is not " + want.shown.container +
             ": the serve could not listen there (stop it, or give the deployment another port)";
}

// The ID of the image the deployment's image resource found on the node.
std::string StagedImageId(const DesiredResource& desired, const DiffContext& ctx) {
  if (ctx.all_actual == nullptr || ctx.manifest == nullptr) return "";
  auto d = ctx.manifest->deployments.find(desired.name);
  if (d == ctx.manifest->deployments.end()) return "";
  auto it = ctx.all_actual->find(ResourceAddress("image", d->second.image, desired.node));
  if (it == ctx.all_actual->end() || !it->second.exists) return "";
  const ImageProbe p = ImageProbe::FromJson(it->second.attributes);
  return p.by_ref.found ? p.by_ref.id : p.by_name.found ? p.by_name.id : "";
}

}  // namespace

namespace deployment_internal {

Result<DesiredResource> WithFabricFacts(const DesiredResource& desired, const DiffContext& ctx) {
  if (ctx.manifest == nullptr) return desired;
  auto d = ctx.manifest->deployments.find(desired.name);
  if (d == ctx.manifest->deployments.end() || !UsesFabric(d->second)) return desired;
  Result<ContainerSpec> spec =
      RenderWithFabric(*ctx.manifest, desired.name, desired.node, ctx.all_facts);
  if (!spec.ok()) return spec.status();
  DesiredResource out = desired;
  DeploymentWant want = desired.attributes.get<DeploymentWant>();
  want.shown = spec->Shown();
  out.attributes = want;
  return out;
}

PlanChange Changed(const DeploymentDiffInput& in, Action action, std::string summary) {
  PlanChange c = in.base;
  c.action = action;
  c.summary = std::move(summary);
  return c;
}

Decision NotProbed(const DesiredResource& desired, const ActualResource& actual,
                   const PlanChange& base) {
  if (actual.probed) return std::nullopt;
  PlanChange c = base;
  c.action = Action::kCreate;
  c.summary = "start " + desired.attributes.get<DeploymentWant>().shown.container;
  c.reasons.push_back("node is not reachable now: the container is checked again at apply");
  return c;
}

Decision ProbeFailed(const DesiredResource& desired, const ActualResource& actual,
                     const DiffContext& ctx, const PlanChange& base) {
  if (actual.error.empty()) return std::nullopt;
  PlanChange c = base;
  c.error = desired.address + ": " +
            WithEngineFix(actual.error, desired.attributes.get<DeploymentWant>().cli, desired.node,
                          NodeSshUser(ctx.manifest, desired.node));
  return c;
}

Decision NoContainer(const DeploymentDiffInput& in) {
  if (in.found.exists) return std::nullopt;
  const std::string& container = in.want.shown.container;
  PlanChange c =
      Changed(in, Action::kCreate, "start " + container + " from " + in.want.shown.image);
  c.reasons.push_back("no container " + container + " on " + in.desired.node);
  if (in.found.port_busy) CheckPort(in.desired, in.want, in.ctx, in.found.serving, &c);
  WaitForDisplacedServes(in.desired, in.ctx, in.found.serving, &c);
  CheckBudget(in.desired, in.want, in.ctx, &c);
  return c;
}

Decision OtherSpec(const DeploymentDiffInput& in) {
  const std::string& want_spec = in.want.shown.spec;
  if (in.found.spec == want_spec) return std::nullopt;
  const std::string& container = in.want.shown.container;
  PlanChange c = Changed(in, Action::kReplace, "replace " + container);
  std::vector<std::string> diffs;
  if (in.record && in.record->want.shown.spec == in.found.spec)
    diffs = SpecDifferences(in.record->want.shown, in.want.shown);
  if (diffs.empty())
    diffs.push_back("container " + container + " runs spec " + in.found.spec.substr(0, 12) +
                    ", not the declared " + want_spec.substr(0, 12));
  c.reasons = diffs;
  return c;
}

// The same spec on another image: a floating tag pulled anew, or the image
// re-staged under the same name.
Decision OtherImage(const DeploymentDiffInput& in) {
  const std::string staged = NormalizeImageId(StagedImageId(in.desired, in.ctx));
  const std::string running = NormalizeImageId(in.found.image);
  if (staged.empty() || running.empty() || staged == running) return std::nullopt;
  PlanChange c = Changed(in, Action::kReplace, "replace " + in.want.shown.container);
  c.reasons.push_back("it runs image " + ShortId(running) + ", but " + in.want.shown.image +
                      " is image " + ShortId(staged) + " on " + in.desired.node + " now");
  return c;
}

// A serve `fleet watch --heal` gave up on: a reviewed apply starts it anew,
// and the record it writes has no quarantine.
Decision Quarantined(const DeploymentDiffInput& in) {
  if (!in.record || !in.record->heal || !in.record->heal->quarantined) return std::nullopt;
  PlanChange c = Changed(in, Action::kReplace, "replace " + in.want.shown.container);
  c.reasons.push_back("quarantined by fleet watch --heal (" + in.record->heal->quarantine +
                      "): apply starts it anew and clears the quarantine");
  return c;
}

Decision StoppedForDisplayRam(const DeploymentDiffInput& in) {
  const std::string& container = in.want.shown.container;
  if (!StoppedByDisplayRam(in.ctx, in.desired.node, container)) return std::nullopt;
  PlanChange c = Changed(in, Action::kUpdate, "start " + container + " again");
  c.reasons.push_back("display_ram." + in.desired.node +
                      " stops it for the nvidia_drm reload; started again after");
  return c;
}

Decision NotRunning(const DeploymentDiffInput& in) {
  if (in.found.state == "running") return std::nullopt;
  PlanChange c = Changed(in, Action::kUpdate, "start " + in.want.shown.container);
  c.reasons.push_back("container is " + in.found.state + " (exit code " +
                      std::to_string(in.found.exit_code) + ")");
  if (in.found.port_busy) CheckPort(in.desired, in.want, in.ctx, in.found.serving, &c);
  WaitForDisplacedServes(in.desired, in.ctx, in.found.serving, &c);
  CheckBudget(in.desired, in.want, in.ctx, &c);
  return c;
}

Decision HealthUnreadable(const DeploymentDiffInput& in) {
  if (in.found.health != -1) return std::nullopt;
  PlanChange c = in.base;
  c.error = in.desired.address + ": cannot read " + in.want.shown.health +
            ": neither curl nor wget is on " + in.desired.node +
            "'s PATH (install one: fleet waits for health before it calls a "
            "serve started)";
  return c;
}

// Unhealthy past health.timeout: replaced; within it: a note, no change.
PlanChange UnhealthyOrStarting(const DeploymentDiffInput& in) {
  PlanChange c = in.base;
  if (in.found.Healthy()) return c;
  const std::string& url = in.want.shown.health;
  const int timeout_s = in.want.health_timeout_s;
  const long age_s = in.found.age_s;
  const std::string answer =
      in.found.health == 0 ? "does not answer" : "answers " + std::to_string(in.found.health);
  if (age_s >= 0 && age_s > timeout_s) {
    c = Changed(in, Action::kReplace, "replace " + in.want.shown.container);
    c.reasons.push_back("unhealthy: " + url + " " + answer + " and it has run " +
                        HumanDuration(age_s) + ", longer than health.timeout " +
                        HumanDuration(timeout_s));
  } else {
    c.reasons.push_back("starting: " + url + " " + answer + " after " + HumanDuration(age_s) +
                        " (health.timeout " + HumanDuration(timeout_s) + ")");
  }
  return c;
}

// A new container needs its from_env values from this shell; starting a
// stopped one or leaving one alone does not.
void CheckEnvFrom(const DesiredResource& desired, const DeploymentWant& want, PlanChange* c) {
  if (!c->error.empty() || (c->action != Action::kCreate && c->action != Action::kReplace)) return;
  for (const auto& [k, var] : want.shown.env_from)
    if (std::getenv(var.c_str()) == nullptr) {
      c->error = desired.address + ": env " + k + " comes from $" + var +
                 " on the controller (from_env), which is not set";
      return;
    }
}

PlanChange DiffContainer(const DesiredResource& desired, const ActualResource& actual,
                         const ResourceRecord* record, const DiffContext& ctx) {
  PlanChange base = ChangeFor(desired);
  base.after = desired.attributes;
  base.detail = DeploymentDetail{desired.name, "", ""};
  if (auto c = NotProbed(desired, actual, base)) return *c;
  if (auto c = ProbeFailed(desired, actual, ctx, base)) return *c;
  const DeploymentWant want = desired.attributes.get<DeploymentWant>();
  const ContainerProbe found = actual.attributes.get<ContainerProbe>();
  const std::optional<DeploymentRecord> rec =
      DeploymentRecordFrom(record ? record->attributes : nlohmann::json());
  const DeploymentDiffInput in{desired, want, found, rec, ctx, base};
  if (auto c = NoContainer(in)) return *c;
  base.before = record ? record->attributes
                       : nlohmann::json{{"container", want.shown.container}, {"spec", found.spec}};
  if (auto c = OtherSpec(in)) return *c;
  if (auto c = OtherImage(in)) return *c;
  if (auto c = Quarantined(in)) return *c;
  if (auto c = StoppedForDisplayRam(in)) return *c;
  if (auto c = NotRunning(in)) return *c;
  if (want.shown.health.empty()) return base;  // a worker: running is all it shows
  if (auto c = HealthUnreadable(in)) return *c;
  return UnhealthyOrStarting(in);
}

// A container of the declared name that the state has no record of: the
// plan says so, and, when it matches (a noop), that adopt takes it over.
void NoteUnrecorded(const DesiredResource& desired, const ActualResource& actual,
                    const ResourceRecord* record, const DiffContext& ctx, PlanChange* c) {
  if (record != nullptr || !actual.exists || !c->error.empty() || !Unrecorded(ctx, desired.address))
    return;
  const std::string& container = desired.attributes.get<DeploymentWant>().shown.container;
  if (c->action == Action::kNoop)
    c->reasons.push_back(UnrecordedServeNote(desired.address, desired.node, container, true));
  else
    c->reasons.push_back("container " + container + " is not in this state (a lost state file, " +
                         "or another operator's): the plan changes it as the manifests declare");
}

}  // namespace deployment_internal

}  // namespace fleet
