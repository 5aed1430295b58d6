#include "providers/deployment/deployment_provider.h"

#include <algorithm>
#include <chrono>
#include <set>
#include <thread>

#include "providers/deployment/deployment_fabric.h"
#include "providers/deployment/deployment_json.h"
#include "providers/deployment/deployment_probe.h"
#include "providers/deployment/deployment_spec.h"
#include "providers/deployment/gpu_request.h"
#include "providers/deployment/group_restart.h"
#include "providers/deployment/row_probe.h"
#include "providers/deployment/serve_per_node.h"
#include "providers/deployment/smoke_check.h"
#include "providers/display_ram/display_ram_provider.h"
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
  if (b.known && !b.fits)
    c->error =
        desired.address + ": gpu_memory does not fit on " + desired.node + ": " + b.explanation;
  else
    c->reasons.push_back(std::string(b.known ? "gpu_memory fits: " : "gpu_memory not checked: ") +
                         b.explanation);
}

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

bool Unrecorded(const DiffContext& ctx, const std::string& address) {
  return ctx.recorded != nullptr && !ctx.recorded->count(address);
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
  // container that is not there is not an error, an engine that cannot say
  // (its daemon down, its storage broken) is.
  return RunOnNode(ctx, "if fd_err=$(" + ShellCommand({cli, "container", "inspect", name}) +
                            " 2>&1 >/dev/null); then " +
                            ShellCommand({cli, "stop", "-t", "30", name}) + " >/dev/null 2>&1; " +
                            ShellCommand({cli, "rm", "-f", name}) +
                            " >/dev/null; else case $fd_err in " + kNoSuchContainerPattern +
                            ") ;; *) printf '%s\\n' \"$fd_err\" >&2; exit 1 ;; esac; fi")
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

// Whether a node has stopped answering during a health wait: polls that
// cannot connect to it (refused, timed out), kDarkPolls in a row and over
// at least kDarkTime. A busy sshd or a LAN blip fails a few connects; a
// node without power or network fails them all, and its serve is gone.
class DarkNode {
 public:
  static constexpr int kDarkPolls = 3;
  static constexpr std::chrono::seconds kDarkTime{30};

  // Notes one poll's outcome; true when the wait should give up.
  bool Note(const Status& poll) {
    if (!poll.unreachable()) {
      polls_ = 0;
      return false;
    }
    if (polls_++ == 0) since_ = Clock::now();
    return polls_ >= kDarkPolls && Clock::now() - since_ >= kDarkTime;
  }
  std::string Describe() const {
    return std::to_string(polls_) + " connections in a row failed over " +
           Duration(
               std::chrono::duration_cast<std::chrono::seconds>(Clock::now() - since_).count());
  }

 private:
  int polls_ = 0;
  Clock::time_point since_;
};

// Waits until the health URL answers 2xx. Fails at once when the container
// stops, when the node has gone dark (DarkNode), and after `timeout_s`.
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
  DarkNode dark;
  if (ctx.progress)
    ctx.progress("waiting for " + url + " (health.timeout " + Duration(spec.health_timeout_s) +
                 ")");
  for (;;) {
    Result<Poll> p = PollContainer(ctx, spec.cli, spec.container, url);
    const long waited =
        std::chrono::duration_cast<std::chrono::seconds>(Clock::now() - start).count();
    if (dark.Note(p.status()))
      return p.status().Reworded("the node stopped answering while " + url + " was awaited (" +
                                 dark.Describe() + ", " + Duration(waited) +
                                 " into health.timeout): " + p.status().message());
    if (!p.ok()) {
      // One lost SSH round trip must not fail a serve that takes 15 min to
      // boot: ask again until the timeout (or until DarkNode gives up).
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
  const size_t host = std::string("http://").size();
  const size_t slash = health.find('/', host);
  const size_t colon = health.rfind(':', slash);
  spec.health_host = health.substr(host, colon - host);
  spec.health_path = slash == std::string::npos ? "/" : health.substr(slash);
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
    c.reasons.push_back("unhealthy: " + url + " " + answer + " and it has run " + Duration(age_s) +
                        ", longer than health.timeout " + Duration(timeout_s));
  } else {
    c.reasons.push_back("starting: " + url + " " + answer + " after " + Duration(age_s) +
                        " (health.timeout " + Duration(timeout_s) + ")");
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

namespace {

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

}  // namespace

using deployment_internal::CheckEnvFrom;
using deployment_internal::DiffContainer;
using deployment_internal::NoteUnrecorded;
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

// The rows of a {rows:...} recipe's tensors, read from the headers of the
// snapshot on the node (staged by now: the deployment depends on its model).
Result<TensorRowCounts> ReadRows(const StepContext& ctx, const RowSource& rows) {
  Result<SnapshotHeaders> h = ReadSnapshotHeaders(ctx.transport, rows.location);
  if (!h.ok()) return h.status();
  return CountTensorRows(*h, rows.tensors, rows.model);
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

// The ID of the image, by digest, already on the node: never a pull.
Result<std::string> StagedImage(const StepContext& ctx, const ContainerSpec& spec) {
  const ImageRef ref = ParseImageRef(spec.image_ref);
  Result<FoundImage> image = FindImage(ctx.transport, spec.cli, ref, "");
  if (!image.ok()) return image.status();
  if (!image->present)
    return Result<std::string>::Error("image " + spec.image + " (" + spec.image_ref +
                                      ") is not on the node; refusing to start " + spec.container +
                                      " (a run would pull it): apply image." + spec.image + "@" +
                                      spec.node + " first");
  return image->id;
}

// The container of that name on the node now, and the spec label it has.
struct ExistingContainer {
  bool exists = false;
  std::string spec;
};

Result<ExistingContainer> InspectExisting(const StepContext& ctx, const ContainerSpec& spec) {
  Result<CommandResult> now = ctx.transport->Run(
      ShellCommand({spec.cli, "container", "inspect", "--format",
                    std::string("{{index .Config.Labels \"") + kSpecLabel + "\"}}",
                    spec.container}) +
      " 2>/dev/null");
  if (!now.ok()) return now.status();
  ExistingContainer e;
  e.exists = now->exit_code == 0;
  e.spec = e.exists ? now->out : "";
  while (!e.spec.empty() && e.spec.back() == '\n') e.spec.pop_back();
  return e;
}

// Nothing else may listen on the port: a server there would answer the
// health check in the serve's place.
Status CheckPortFree(const StepContext& ctx, const ContainerSpec& spec) {
  if (spec.HealthUrl().empty()) return Status::OK();  // a worker does not own the port
  Result<CommandResult> r = ctx.transport->Run(PortBusyCommand(spec.port));
  if (!r.ok()) return r.status();
  if (r->out.find("port_busy=1") != std::string::npos)
    return Status::Error("port " + std::to_string(spec.port) +
                         " is in use by another process on the node; not starting " +
                         spec.container);
  return Status::OK();
}

// The declared container is there: start it when it is stopped, and wait
// for its health.
// Healthy, then the deployment's smoke checks: a serve that answers 200 but
// garbles fails its step like an unhealthy one.
Status WaitServing(const StepContext& ctx, const ContainerSpec& spec) {
  Status healthy = WaitHealthy(ctx, spec);
  return healthy.ok() ? SmokeAfterHealthy(ctx, spec) : healthy;
}

Status StartExisting(const StepContext& ctx, const ContainerSpec& spec) {
  Result<CommandResult> state = ctx.transport->Run(ShellCommand(
      {spec.cli, "container", "inspect", "--format", "{{.State.Status}}", spec.container}));
  if (!state.ok()) return state.status();
  if (state->out.rfind("running", 0) != 0) {
    Status s = CheckPortFree(ctx, spec);
    if (!s.ok()) return s;
    if (ctx.progress) ctx.progress("starting " + spec.container);
    s = RunOnNode(ctx, ShellCommand({spec.cli, "start", spec.container}) + " >/dev/null").status();
    if (!s.ok()) return s;
  }
  return WaitServing(ctx, spec);
}

// `run` options: name, labels, the model's per-file binds, the recipe's
// options with {model_path} and ~ spelled as the node spells them.
Result<std::vector<std::string>> RunOptions(const StepContext& ctx, const ContainerSpec& spec,
                                            const std::string& home) {
  using R = Result<std::vector<std::string>>;
  std::vector<std::string> options = {"--detach",
                                      "--name",
                                      spec.container,
                                      "--label",
                                      std::string(kDeploymentLabel) + "=" + spec.deployment,
                                      "--label",
                                      std::string(kSpecLabel) + "=" + spec.hash};
  if (spec.model.empty()) {
    for (const std::string& o : spec.options) options.push_back(ExpandHome(o, home));
    return options;
  }
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
  return options;
}

// The env a container gets through a file (0600), so that no value is on a
// command line, in an error or left on the node's disk. Empty path: no env.
struct EnvFile {
  std::string path;
  std::string text;
};

Result<EnvFile> PrepareEnvFile(const ContainerSpec& spec, const std::string& home) {
  using R = Result<EnvFile>;
  EnvFile f;
  if (spec.env.empty() && spec.env_from.empty()) return f;
  std::map<std::string, std::string> values = spec.env;
  for (const auto& [k, var] : spec.env_from) {
    const char* v = std::getenv(var.c_str());
    if (v == nullptr)
      return R::Error("env " + k + " comes from $" + var +
                      " on the controller (from_env), which is not set");
    values.insert_or_assign(k, v);
  }
  for (const auto& [k, v] : values) {
    if (v.find('\n') != std::string::npos)
      return R::Error("deployment " + spec.deployment + ": env " + k + " holds a newline");
    f.text += k + "=" + v + "\n";
  }
  f.path = home + "/.fleet/deployments/" + spec.container + ".env";
  return f;
}

std::string PreviousName(const ContainerSpec& spec) { return spec.container + "-previous"; }

// A replaced container is kept, stopped, until the new one is healthy; one
// left by an apply that died half way is removed.
Status SetAsidePrevious(const StepContext& ctx, const ContainerSpec& spec,
                        const ExistingContainer& existing) {
  Status s = RemoveContainer(ctx, spec.cli, PreviousName(spec));
  if (!s.ok() || !existing.exists) return s;
  if (ctx.progress)
    ctx.progress("stopping " + spec.container + " (spec " + existing.spec.substr(0, 12) + ")");
  return RunOnNode(ctx, ShellCommand({spec.cli, "stop", "-t", "30", spec.container}) +
                            " >/dev/null && " +
                            ShellCommand({spec.cli, "rename", spec.container, PreviousName(spec)}))
      .status();
}

// Puts the container set aside back and starts it; what happened, as the
// tail of an error message.
std::string PutBackPrevious(const StepContext& ctx, const ContainerSpec& spec) {
  Status s =
      RunOnNode(ctx, ShellCommand({spec.cli, "rename", PreviousName(spec), spec.container}) +
                         " && " + ShellCommand({spec.cli, "start", spec.container}) + " >/dev/null")
          .status();
  return s.ok() ? "; the container it replaced is back and started (its health is not "
                  "waited for)"
                : "; putting back the container it replaced failed: " + s.message();
}

// `run --pull=never` of the image by ID. A node that lost power while
// podman created a container can keep the name in podman's storage with no
// container podman lists (`run` then says the name "is already in use", and
// no plan sees it): that storage-only container is removed (`rm --storage`
// refuses any container podman knows) and the run tried once more.
Status RunContainer(const StepContext& ctx, const ContainerSpec& spec,
                    const std::vector<std::string>& options, const std::string& image_id) {
  const std::string run_command =
      ShellCommand(RunArgsNoPull(spec.cli, options, image_id, spec.command));
  Result<CommandResult> run = ctx.transport->Run(run_command);
  if (run.ok() && run->exit_code != 0 && spec.cli == "podman" &&
      run->err.find("is already in use") != std::string::npos) {
    Result<CommandResult> rm =
        ctx.transport->Run(ShellCommand({spec.cli, "rm", "--storage", spec.container}));
    if (rm.ok() && rm->exit_code == 0) {
      if (ctx.progress) ctx.progress("removed a storage-only " + spec.container + " (power loss?)");
      run = ctx.transport->Run(run_command);
    }
  }
  if (!run.ok()) return run.status();
  if (run->exit_code != 0)
    return Status::Error("`" + spec.cli + " run` of " + spec.container + " failed: " + run->err);
  return Status::OK();
}

// `run --pull=never` of the image by ID, the env file written right before
// and removed right after, whatever happens: the container holds the values
// from then on.
Status StartContainer(const StepContext& ctx, const ContainerSpec& spec,
                      std::vector<std::string> options, const EnvFile& env,
                      const std::string& image_id, const std::string& home) {
  Status started = CheckPortFree(ctx, spec);
  if (started.ok() && !env.path.empty()) {
    options.push_back("--env-file");
    options.push_back(env.path);
    started =
        RunOnNode(ctx, ShellCommand({"mkdir", "-p", "-m", "0700", home + "/.fleet/deployments"}))
            .status();
    if (started.ok()) started = ctx.transport->WriteFile(env.path, env.text, 0600);
  }
  if (started.ok()) {
    if (ctx.progress) ctx.progress("starting " + spec.container + " from " + spec.image_ref);
    started = RunContainer(ctx, spec, options, image_id);
  }
  if (!env.path.empty()) {
    Status removed = RunOnNode(ctx, ShellCommand({"rm", "-f", env.path})).status();
    if (!removed.ok())  // the file holds the serve's secrets: say it stayed
      started = removed.Reworded((started.ok() ? "" : started.message() + "; ") + "the env file " +
                                 env.path + " stayed on the node: " + removed.message());
  }
  return started;
}

// A new container in place of what is there (nothing, or another spec):
// set the old one aside, start the new one, wait for its health; on
// failure remove it and put the old one back.
Status ReplaceContainer(const StepContext& ctx, const ContainerSpec& spec,
                        const ExistingContainer& existing, const std::string& image_id) {
  const std::string home = Home(ctx);
  if (home.empty()) return Status::Error("cannot read $HOME on the node");
  Result<std::vector<std::string>> options = RunOptions(ctx, spec, home);
  if (!options.ok()) return options.status();
  Result<EnvFile> env = PrepareEnvFile(spec, home);
  if (!env.ok()) return env.status();
  Status s = SetAsidePrevious(ctx, spec, existing);
  if (!s.ok()) return s;
  Status started = StartContainer(ctx, spec, *options, *env, image_id, home);
  Status healthy = started.ok() ? WaitServing(ctx, spec) : started;
  if (!healthy.ok()) {
    Status removed = RemoveContainer(ctx, spec.cli, spec.container);
    const std::string message = healthy.message() + "\n  " + spec.container +
                                (removed.ok() ? " removed" : " not removed: " + removed.message()) +
                                (existing.exists ? PutBackPrevious(ctx, spec) : "");
    // The removal is the latest word on the node: it answered, or not.
    return removed.ok() ? Status::Error(message) : removed.Reworded(message);
  }
  if (existing.exists) RemoveContainer(ctx, spec.cli, PreviousName(spec));
  return Status::OK();
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

// The started container's id, for the state record. A node that stops
// answering here fails the step: the serve answered a moment ago, but the
// apply cannot say it still runs (tests/faults/silent.sh found an apply that
// ended 0 with the node dark since just after the health check).
Result<std::string> ContainerId(const StepContext& ctx, const ContainerSpec& spec) {
  Result<CommandResult> id = ctx.transport->Run(
      ShellCommand({spec.cli, "container", "inspect", "--format", "{{.Id}}", spec.container}));
  if (!id.ok()) return id.status();
  if (id->exit_code != 0)
    return Result<std::string>::Error("container " + spec.container +
                                      " is gone right after it answered: inspect exited " +
                                      std::to_string(id->exit_code) + ": " + id->err);
  std::string cid = id->out;
  while (!cid.empty() && cid.back() == '\n') cid.pop_back();
  return cid;
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
  Status s = same ? StartExisting(ctx, *spec) : ReplaceContainer(ctx, *spec, *existing, *image_id);
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
