#include "providers/deployment/deployment_provider.h"

#include <algorithm>
#include <chrono>
#include <thread>

#include "providers/deployment/deployment_probe.h"
#include "providers/deployment/deployment_spec.h"
#include "providers/deployment/gpu_request.h"
#include "providers/deployment/group_restart.h"
#include "providers/deployment/serve_per_node.h"
#include "providers/image/engine_check.h"
#include "providers/image/image_probe.h"
#include "providers/image/image_ref.h"
#include "providers/image/image_steps.h"
#include "providers/image/run_args.h"
#include "providers/model/bind_list.h"
#include "providers/model/hub_cache.h"
#include "providers/model/model_provider.h"
#include "providers/node/gpu_facts.h"
#include "src/shell_quote.h"
#include "state/state.h"

namespace fleet {
namespace {

using Clock = std::chrono::steady_clock;

std::string ModelAddress(const Manifest& m, const std::string& model, const std::string& node) {
  auto it = m.models.find(model);
  if (it == m.models.end()) return "";
  const std::string& store = it->second.store;
  return ResourceAddress("model", model, store.empty() || store == "local" ? node : store);
}

std::string Duration(long s) {
  if (s < 0) return "?";
  if (s < 120) return std::to_string(s) + " s";
  if (s < 7200) return std::to_string(s / 60) + " min";
  return std::to_string(s / 3600) + " h";
}

std::string HealthUrl(const nlohmann::json& spec) { return spec.value("health", ""); }

// The containers a display RAM change planned on `node` stops first.
bool StoppedByDisplayRam(const DiffContext& ctx, const std::string& node,
                         const std::string& container) {
  if (ctx.planned == nullptr) return false;
  for (const PlanChange& c : *ctx.planned) {
    if (c.address != "display_ram." + node || c.action == Action::kNoop) continue;
    for (const auto& n : c.detail.value("stop_containers", nlohmann::json::array()))
      if (n == container) return true;
  }
  return false;
}

// The memory budget check for a serve about to start: an error when the
// node's free GPU memory is known and short, a note when it is unknown.
void CheckBudget(const DesiredResource& desired, const DiffContext& ctx, PlanChange* c) {
  const uint64_t need = desired.attributes.value("gpu_memory_bytes", uint64_t{0});
  if (need == 0) return;
  GpuFacts facts;
  if (!GpuFactsFromJson(ctx.facts.gpu, &facts)) {
    c->reasons.push_back("gpu_memory not checked: no GPU facts for " + desired.node);
    return;
  }
  const BudgetAnswer b = CheckMemoryBudget(facts, need);
  if (b.known && !b.fits)
    c->error =
        desired.address + ": gpu_memory does not fit on " + desired.node + ": " + b.explanation;
  else
    c->reasons.push_back(std::string(b.known ? "gpu_memory fits: " : "gpu_memory not checked: ") +
                         b.explanation);
}

// A fleet serving container on `node` that the manifests no longer declare
// there, among `serving` (what runs with the fleet.deployment label): the
// plan removes it (DiffOrphan), and it may hold the port a new deployment
// wants (a renamed deployment). "" when none.
std::string UndeclaredServe(const DiffContext& ctx, const std::string& node,
                            const std::vector<std::string>& serving) {
  if (ctx.manifest == nullptr) return "";
  for (const std::string& name : serving) {
    const std::string prefix = ContainerName("");
    if (name.rfind(prefix, 0) != 0) continue;
    auto d = ctx.manifest->deployments.find(name.substr(prefix.size()));
    if (d == ctx.manifest->deployments.end() ||
        std::find(d->second.nodes.begin(), d->second.nodes.end(), node) == d->second.nodes.end())
      return name;
  }
  return "";
}

// A port something else listens on: an error, unless an undeclared fleet
// serve that this plan removes first holds it.
void CheckPort(const DesiredResource& desired, const DiffContext& ctx,
               const std::vector<std::string>& serving, PlanChange* c) {
  const std::string port = std::to_string(desired.attributes.value("port", 0));
  const std::string holder = UndeclaredServe(ctx, desired.node, serving);
  if (!holder.empty()) {
    const std::string address =
        ResourceAddress("deployment", holder.substr(ContainerName("").size()), desired.node);
    c->depends_on.push_back(address);
    c->reasons.push_back("port " + port + " is in use, by " + holder +
                         " as it seems: the manifests no longer declare it, and " + address +
                         " is removed first");
    return;
  }
  c->error = desired.address + ": port " + port + " on " + desired.node +
             " is already in use by a process that is not " +
             desired.attributes.value("container", "") +
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

std::string Home(const StepContext& ctx) {
  Result<CommandResult> r = ctx.transport->Run("printf '%s' \"$HOME\"");
  return r.ok() && r->exit_code == 0 ? r->out : "";
}

std::string ExpandHome(const std::string& path, const std::string& home) {
  if (path == "~") return home;
  if (path.rfind("~/", 0) == 0) return home + path.substr(1);
  return path;
}

// The last lines the container printed, for an error message.
// Engines print their arguments (sglang's server_args, vLLM's non-default
// args): the secrets of `spec` are masked.
std::string LogTail(const StepContext& ctx, const ContainerSpec& spec) {
  Result<CommandResult> r = ctx.transport->Run(
      ShellCommand({spec.cli, "logs", "--tail", "20", spec.container}) + " 2>&1");
  if (!r.ok() || r->out.empty()) return "";
  std::string out = Redact(r->out, SecretValues(spec));
  while (!out.empty() && out.back() == '\n') out.pop_back();
  return "\n  last lines of its log:\n    " + [&] {
    std::string s;
    for (char c : out) s += c == '\n' ? std::string("\n    ") : std::string(1, c);
    return s;
  }();
}

Status RemoveContainer(const StepContext& ctx, const std::string& cli, const std::string& name) {
  // docker and podman alike: stop with a grace period, then remove; a
  // container that is not there is not an error.
  return RunOnNode(ctx, "if " + ShellCommand({cli, "container", "inspect", name}) +
                            " >/dev/null 2>&1; then " +
                            ShellCommand({cli, "stop", "-t", "30", name}) + " >/dev/null 2>&1; " +
                            ShellCommand({cli, "rm", "-f", name}) + " >/dev/null; fi")
      .status();
}

// State and health of the container, one command.
struct Poll {
  std::string state;
  int exit_code = 0;
  int health = -1;
};

Result<Poll> PollContainer(const StepContext& ctx, const std::string& cli,
                           const std::string& container, const std::string& url) {
  Result<CommandResult> r =
      ctx.transport->Run("echo state=$(" +
                         ShellCommand({cli, "container", "inspect", "--format",
                                       "{{.State.Status}} {{.State.ExitCode}}", container}) +
                         " 2>/dev/null)\n" + (url.empty() ? std::string() : HealthCommand(url)));
  if (!r.ok()) return r.status();
  ContainerProbe p = ParseContainerProbe(r->out);
  Poll poll;
  const std::map<std::string, std::string> kv = ParseKeyValues(r->out);
  if (auto it = kv.find("state"); it != kv.end()) {
    std::string s = it->second;
    size_t sp = s.find(' ');
    poll.state = s.substr(0, sp);
    if (sp != std::string::npos) poll.exit_code = std::atoi(s.c_str() + sp + 1);
  }
  poll.health = p.health;
  return poll;
}

// Waits until the health URL answers 2xx. Fails at once when the container
// stops, and after `timeout_s`.
Status WaitHealthy(const StepContext& ctx, const ContainerSpec& spec) {
  const std::string url = spec.HealthUrl();
  if (url.empty()) {
    // A worker: it serves no API; it is healthy while it runs (the head's
    // health check, which needs every worker, says the rest).
    std::this_thread::sleep_for(std::chrono::seconds(2));
    Result<Poll> p = PollContainer(ctx, spec.cli, spec.container, "");
    if (!p.ok()) return p.status();
    if (p->state == "running") return Status::OK();
    return Status::Error("container " + spec.container + " (rank " + std::to_string(spec.rank) +
                         ") is " + (p->state.empty() ? "gone" : p->state) + " (exit code " +
                         std::to_string(p->exit_code) + ") 2 s after its start" +
                         LogTail(ctx, spec));
  }
  const auto start = Clock::now();
  auto last_report = start;
  for (;;) {
    Result<Poll> p = PollContainer(ctx, spec.cli, spec.container, url);
    const long waited =
        std::chrono::duration_cast<std::chrono::seconds>(Clock::now() - start).count();
    if (!p.ok()) {
      // One lost SSH round trip must not fail a serve that takes 15 min to
      // boot: ask again until the timeout.
      if (waited >= spec.health_timeout_s) return p.status();
      if (ctx.progress) ctx.progress("health poll failed, retrying: " + p.status().message());
      std::this_thread::sleep_for(std::chrono::seconds(2));
      continue;
    }
    if (p->state != "running")
      return Status::Error(
          "container " + spec.container +
          (p->state.empty()
               ? " disappeared"
               : " is " + p->state + " (exit code " + std::to_string(p->exit_code) + ")") +
          " after " + Duration(waited) + ", before " + url + " answered" + LogTail(ctx, spec));
    if (p->health >= 200 && p->health < 300) return Status::OK();
    if (p->health == -1 && p->state == "running")
      return Status::Error("cannot check " + url + ": neither curl nor wget is on the node's PATH");
    if (waited >= spec.health_timeout_s)
      return Status::Error(url + " did not answer 2xx within " + Duration(spec.health_timeout_s) +
                           " (health.timeout; last answer: " +
                           (p->health == 0 ? std::string("none") : std::to_string(p->health)) +
                           ")" + LogTail(ctx, spec));
    if (ctx.progress && Clock::now() - last_report >= std::chrono::seconds(10)) {
      last_report = Clock::now();
      ctx.progress("waiting for " + url + " (" + Duration(waited) + " of " +
                   Duration(spec.health_timeout_s) + ", last answer " +
                   (p->health == 0 ? std::string("none") : std::to_string(p->health)) + ")");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(waited < 10 ? 300 : 2000));
  }
}

// The state record: what the plan said it would run, and what it runs as.
nlohmann::json Recorded(const PlanChange& change, const std::string& id,
                        const std::string& image_id) {
  nlohmann::json a = change.after;
  a["container_id"] = id;
  a["image_id"] = image_id;
  return a;
}

}  // namespace

std::vector<DesiredResource> DeploymentProvider::Expand(const Manifest& m) const {
  std::vector<DesiredResource> out;
  for (const auto& [name, d] : m.deployments) {
    for (const std::string& node : d.nodes) {
      Result<ContainerSpec> spec = RenderContainerSpec(m, name, node);
      if (!spec.ok()) continue;  // the loader reports what is missing
      DesiredResource r;
      r.address = ResourceAddress("deployment", name, node);
      r.type = "deployment";
      r.name = name;
      r.node = node;
      r.attributes = spec->ToPlanJson();
      r.attributes["cli"] = spec->cli;
      r.attributes["health_timeout_s"] = spec->health_timeout_s;
      if (d.gpu_memory_bytes > 0) r.attributes["gpu_memory_bytes"] = d.gpu_memory_bytes;
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
  ContainerSpec spec;
  spec.cli = node.container_cli;
  spec.container = r.attributes.value("container", "");
  spec.port = r.attributes.value("port", 0);
  spec.gpus = r.attributes.value("gpus", "");
  // The plan's "http://<host>:<port><path>", split again ("": a worker).
  const std::string health = r.attributes.value("health", "");
  if (health.empty()) {
    spec.rank = 1;
    return ContainerProbeScript(spec);
  }
  const size_t host = std::string("http://").size();
  const size_t slash = health.find('/', host);
  const size_t colon = health.rfind(':', slash);
  spec.health_host = health.substr(host, colon - host);
  spec.health_path = slash == std::string::npos ? "/" : health.substr(slash);
  return ContainerProbeScript(spec);
}

ActualResource DeploymentProvider::ParseProbe(const DesiredResource& r, const std::string& output,
                                              const NodeFacts&) const {
  ActualResource a;
  a.probed = true;
  ContainerProbe p = ParseContainerProbe(output);
  a.exists = p.exists;
  a.attributes = p.ToJson();
  RecordGpuSupport(r, output, &a);
  if (!p.cli_found)
    a.error = "container_cli '" + r.attributes.value("cli", "") + "' not found on the node's PATH";
  else if (!p.error.empty())
    a.error = "cannot inspect container " + r.attributes.value("container", "") + ": " + p.error;
  return a;
}

PlanChange DeploymentProvider::Diff(const DesiredResource& desired, const ActualResource& actual,
                                    const ResourceRecord* record, const DiffContext& ctx) const {
  PlanChange c = DiffContainer(desired, actual, record, ctx);
  if (c.error.empty() && actual.probed) RestartWithGroup(desired, ctx, &c);
  // A new container needs its from_env values from this shell; starting
  // a stopped one or leaving one alone does not.
  if (c.error.empty() && (c.action == Action::kCreate || c.action == Action::kReplace))
    c.error = GpuPlanError(desired, actual);
  if (c.error.empty() && (c.action == Action::kCreate || c.action == Action::kReplace)) {
    const nlohmann::json env_from = desired.attributes.value("env_from", nlohmann::json::object());
    for (const auto& [k, var] : env_from.items())
      if (std::getenv(var.get<std::string>().c_str()) == nullptr) {
        c.error = desired.address + ": env " + k + " comes from $" + var.get<std::string>() +
                  " on the controller (from_env), which is not set";
        break;
      }
  }
  return c;
}

PlanChange DeploymentProvider::DiffContainer(const DesiredResource& desired,
                                             const ActualResource& actual,
                                             const ResourceRecord* record,
                                             const DiffContext& ctx) const {
  PlanChange c = ChangeFor(desired);
  const nlohmann::json& want = desired.attributes;
  const std::string container = want.value("container", "");
  const std::string url = HealthUrl(want);
  const int timeout_s = want.value("health_timeout_s", 1800);
  c.after = want;
  c.detail = {{"name", desired.name}};
  if (!actual.probed) {
    c.action = Action::kCreate;
    c.summary = "start " + container;
    c.reasons.push_back("node is not reachable now: the container is checked again at apply");
    return c;
  }
  if (!actual.error.empty()) {
    c.error = desired.address + ": " +
              WithEngineFix(actual.error, want.value("cli", ""), desired.node,
                            NodeSshUser(ctx.manifest, desired.node));
    return c;
  }
  const ContainerProbe p = ContainerProbe::FromJson(actual.attributes);
  const nlohmann::json before = record ? record->attributes : nlohmann::json();

  if (!p.exists) {
    c.action = Action::kCreate;
    c.summary = "start " + container + " from " + want.value("image", "");
    c.reasons.push_back("no container " + container + " on " + desired.node);
    if (p.port_busy) CheckPort(desired, ctx, p.serving, &c);
    WaitForDisplacedServes(desired, ctx, p.serving, &c);
    CheckBudget(desired, ctx, &c);
    return c;
  }

  c.before = before.is_null() ? nlohmann::json{{"container", container}, {"spec", p.spec}} : before;
  if (p.spec != want.value("spec", "")) {
    c.action = Action::kReplace;
    c.summary = "replace " + container;
    std::vector<std::string> diffs;
    if (!before.is_null() && before.value("spec", "") == p.spec)
      diffs = SpecDifferences(before, want);
    if (diffs.empty())
      diffs.push_back("container " + container + " runs spec " + p.spec.substr(0, 12) +
                      ", not the declared " + want.value("spec", "").substr(0, 12));
    c.reasons = diffs;
    return c;
  }
  // The same spec on another image: a floating tag pulled anew, or the
  // image re-staged under the same name.
  const std::string staged = NormalizeImageId(StagedImageId(desired, ctx));
  const std::string running = NormalizeImageId(p.image);
  if (!staged.empty() && !running.empty() && staged != running) {
    c.action = Action::kReplace;
    c.summary = "replace " + container;
    c.reasons.push_back("it runs image " + ShortId(running) + ", but " + want.value("image", "") +
                        " is image " + ShortId(staged) + " on " + desired.node + " now");
    return c;
  }
  if (StoppedByDisplayRam(ctx, desired.node, container)) {
    c.action = Action::kUpdate;
    c.summary = "start " + container + " again";
    c.reasons.push_back("display_ram." + desired.node +
                        " stops it for the nvidia_drm reload; started again after");
    return c;
  }
  if (p.state != "running") {
    c.action = Action::kUpdate;
    c.summary = "start " + container;
    c.reasons.push_back("container is " + p.state + " (exit code " + std::to_string(p.exit_code) +
                        ")");
    if (p.port_busy) CheckPort(desired, ctx, p.serving, &c);
    WaitForDisplacedServes(desired, ctx, p.serving, &c);
    CheckBudget(desired, ctx, &c);
    return c;
  }
  if (url.empty()) return c;  // a worker: running is all it shows
  if (p.health == -1) {
    c.error = desired.address + ": cannot read " + url + ": neither curl nor wget is on " +
              desired.node +
              "'s PATH (install one: fleet waits for health before it calls a "
              "serve started)";
    return c;
  }
  if (!p.Healthy()) {
    const std::string answer =
        p.health == 0 ? "does not answer" : "answers " + std::to_string(p.health);
    if (p.age_s >= 0 && p.age_s > timeout_s) {
      c.action = Action::kReplace;
      c.summary = "replace " + container;
      c.reasons.push_back("unhealthy: " + url + " " + answer + " and it has run " +
                          Duration(p.age_s) + ", longer than health.timeout " +
                          Duration(timeout_s));
    } else {
      c.reasons.push_back("starting: " + url + " " + answer + " after " + Duration(p.age_s) +
                          " (health.timeout " + Duration(timeout_s) + ")");
    }
  }
  return c;
}

PlanChange DeploymentProvider::DiffDestroy(const DesiredResource& desired,
                                           const ActualResource& actual,
                                           const ResourceRecord* record, const DiffContext&) const {
  PlanChange c = ChangeFor(desired);
  const std::string container = desired.attributes.value("container", "");
  c.detail = {{"name", desired.name}};
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
  const std::string container = record.attributes.value("container", "");
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
  c.detail = {{"container", container}, {"cli", record.attributes.value("cli", "")}};
  return c;
}

Result<nlohmann::json> DeploymentProvider::Apply(const PlanChange& change,
                                                 const StepContext& ctx) const {
  using R = Result<nlohmann::json>;
  if (change.action == Action::kDelete) {
    std::string container = change.detail.value("container", "");
    std::string cli = change.detail.value("cli", "");
    if (container.empty() && change.before.is_object())
      container = change.before.value("container", "");
    if (cli.empty()) cli = ctx.node->container_cli;
    if (container.empty()) return nlohmann::json();
    Status s = RemoveContainer(ctx, cli, container);
    if (s.ok()) s = RemoveContainer(ctx, cli, container + "-previous");
    if (!s.ok()) return s;
    return nlohmann::json();  // removed: drop the record
  }

  const std::string name = change.detail.value("name", "");
  Result<ContainerSpec> rendered = RenderContainerSpec(*ctx.manifest, name, ctx.node->name);
  if (!rendered.ok()) return rendered.status();
  const ContainerSpec& spec = *rendered;
  if (spec.hash != change.after.value("spec", ""))
    return R::Error("deployment " + name +
                    " differs from the plan (the manifests changed since): plan again");
  const std::string& cli = spec.cli;

  // The image, by digest, already on the node: never a pull.
  const ImageRef ref = ParseImageRef(spec.image_ref);
  Result<FoundImage> image = FindImage(ctx.transport, cli, ref, "");
  if (!image.ok()) return image.status();
  if (!image->present)
    return R::Error("image " + spec.image + " (" + spec.image_ref +
                    ") is not on the node; refusing to start " + spec.container +
                    " (a run would pull it): apply image." + spec.image + "@" + spec.node +
                    " first");

  // What is there now: the same spec stopped (start it), another (replace it).
  Result<CommandResult> now = ctx.transport->Run(
      ShellCommand({cli, "container", "inspect", "--format",
                    std::string("{{index .Config.Labels \"") + kSpecLabel + "\"}}",
                    spec.container}) +
      " 2>/dev/null");
  if (!now.ok()) return now.status();
  std::string running_spec = now->exit_code == 0 ? now->out : "";
  while (!running_spec.empty() && running_spec.back() == '\n') running_spec.pop_back();
  const bool exists = now->exit_code == 0;
  const std::string previous = spec.container + "-previous";

  // Nothing else may listen on the port: a server there would answer the
  // health check in the serve's place.
  auto port_free = [&]() -> Status {
    if (spec.HealthUrl().empty()) return Status::OK();  // a worker does not own the port
    Result<CommandResult> r = ctx.transport->Run(PortBusyCommand(spec.port));
    if (!r.ok()) return r.status();
    if (r->out.find("port_busy=1") != std::string::npos)
      return Status::Error("port " + std::to_string(spec.port) +
                           " is in use by another process on the node; not starting " +
                           spec.container);
    return Status::OK();
  };

  if (exists && running_spec == spec.hash && change.action != Action::kReplace) {
    Result<CommandResult> state = ctx.transport->Run(ShellCommand(
        {cli, "container", "inspect", "--format", "{{.State.Status}}", spec.container}));
    if (!state.ok()) return state.status();
    if (state->out.rfind("running", 0) != 0) {
      Status s = port_free();
      if (!s.ok()) return s;
      if (ctx.progress) ctx.progress("starting " + spec.container);
      s = RunOnNode(ctx, ShellCommand({cli, "start", spec.container}) + " >/dev/null").status();
      if (!s.ok()) return s;
    }
    Status s = WaitHealthy(ctx, spec);
    if (!s.ok()) return s;
  } else {
    const std::string home = Home(ctx);
    if (home.empty()) return R::Error("cannot read $HOME on the node");
    std::vector<std::string> options = {"--detach",
                                        "--name",
                                        spec.container,
                                        "--label",
                                        std::string(kDeploymentLabel) + "=" + name,
                                        "--label",
                                        std::string(kSpecLabel) + "=" + spec.hash};
    if (!spec.model.empty()) {
      Result<HubLocation> loc = ModelLocationOnNode(*ctx.manifest, spec.model, spec.node);
      if (!loc.ok()) return loc.status();
      Result<std::vector<BindMount>> binds =
          ModelBindList(ctx.transport, loc->cache, loc->repo, loc->revision, spec.model_root);
      if (!binds.ok()) return R::Error("model " + spec.model + ": " + binds.status().message());
      for (const BindMount& b : *binds) {
        options.push_back("--volume");
        options.push_back(b.host + ":" + b.container + ":ro");
      }
      const std::string snapshot = ExpandHome(loc->cache, home) + "/" + HubRepoDirName(loc->repo) +
                                   "/snapshots/" + loc->revision;
      for (const std::string& o : spec.options)
        options.push_back(ExpandHome(FillPlaceholders(o, {{"model_path", snapshot}}), home));
    } else {
      for (const std::string& o : spec.options) options.push_back(ExpandHome(o, home));
    }
    // An env file, 0600, removed once the container holds its values: no
    // value on a command line, in an error or left on the node's disk.
    std::string env_file, env_text;
    if (!spec.env.empty() || !spec.env_from.empty()) {
      std::map<std::string, std::string> values = spec.env;
      for (const auto& [k, var] : spec.env_from) {
        const char* v = std::getenv(var.c_str());
        if (v == nullptr)
          return R::Error("env " + k + " comes from $" + var +
                          " on the controller (from_env), which is not set");
        values[k] = v;
      }
      std::string text;
      for (const auto& [k, v] : values) {
        if (v.find('\n') != std::string::npos)
          return R::Error("deployment " + name + ": env " + k + " holds a newline");
        text += k + "=" + v + "\n";
      }
      env_text = text;
      env_file = home + "/.fleet/deployments/" + spec.container + ".env";
      options.push_back("--env-file");
      options.push_back(env_file);
    }

    // A replaced container is kept, stopped, until the new one is healthy;
    // one left by an apply that died half way is removed.
    Status s = RemoveContainer(ctx, cli, previous);
    if (s.ok() && exists) {
      if (ctx.progress)
        ctx.progress("stopping " + spec.container + " (spec " + running_spec.substr(0, 12) + ")");
      s = RunOnNode(ctx, ShellCommand({cli, "stop", "-t", "30", spec.container}) +
                             " >/dev/null && " +
                             ShellCommand({cli, "rename", spec.container, previous}))
              .status();
    }
    if (!s.ok()) return s;
    auto put_back = [&]() -> std::string {
      if (!exists) return "";
      Status s = RunOnNode(ctx, ShellCommand({cli, "rename", previous, spec.container}) + " && " +
                                    ShellCommand({cli, "start", spec.container}) + " >/dev/null")
                     .status();
      return s.ok() ? "; the container it replaced is back and started (its health is not "
                      "waited for)"
                    : "; putting back the container it replaced failed: " + s.message();
    };

    Status started = port_free();
    if (started.ok() && !env_file.empty()) {
      // Written right before the run and removed right after it, whatever
      // happens: the container holds the values from then on.
      started =
          RunOnNode(ctx, ShellCommand({"mkdir", "-p", "-m", "0700", home + "/.fleet/deployments"}))
              .status();
      if (started.ok()) started = ctx.transport->WriteFile(env_file, env_text, 0600);
    }
    if (started.ok()) {
      if (ctx.progress) ctx.progress("starting " + spec.container + " from " + spec.image_ref);
      Result<CommandResult> run =
          ctx.transport->Run(ShellCommand(RunArgsNoPull(cli, options, image->id, spec.command)));
      started =
          !run.ok() ? run.status()
          : run->exit_code != 0
              ? Status::Error("`" + cli + " run` of " + spec.container + " failed: " + run->err)
              : Status::OK();
    }
    if (!env_file.empty()) {
      Status removed = RunOnNode(ctx, ShellCommand({"rm", "-f", env_file})).status();
      if (!removed.ok() && started.ok()) started = removed;
    }
    Status healthy = started.ok() ? WaitHealthy(ctx, spec) : started;
    if (!healthy.ok()) {
      RemoveContainer(ctx, cli, spec.container);
      return Status::Error(healthy.message() + "\n  " + spec.container + " removed" + put_back());
    }
    if (exists) RemoveContainer(ctx, cli, previous);
  }

  Result<CommandResult> id = ctx.transport->Run(
      ShellCommand({cli, "container", "inspect", "--format", "{{.Id}}", spec.container}));
  std::string cid = id.ok() && id->exit_code == 0 ? id->out : "";
  while (!cid.empty() && cid.back() == '\n') cid.pop_back();
  return Recorded(change, cid, image->id);
}

Status DeploymentProvider::Undo(const PlanChange& change, const nlohmann::json& applied,
                                const StepContext& ctx, bool* undone) const {
  *undone = false;
  if (change.action != Action::kCreate || !applied.is_object()) return Status::OK();
  Status s = RemoveContainer(ctx, applied.value("cli", ctx.node->container_cli),
                             applied.value("container", ""));
  if (s.ok()) *undone = true;
  return s;
}

}  // namespace fleet
