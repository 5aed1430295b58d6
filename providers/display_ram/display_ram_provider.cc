#include "providers/display_ram/display_ram_provider.h"

#include <sstream>

#include "providers/deployment/deployment_probe.h"
#include "providers/deployment/deployment_spec.h"
#include "providers/image/engine_check.h"
#include "providers/node/gpu_facts.h"
#include "src/shell_quote.h"
#include "state/state.h"

namespace fleet {

namespace {

constexpr const char* kModule = "nvidia_drm";

struct ModuleState {
  bool loaded = false;
  std::string modeset;  // "Y" / "N" as the kernel prints them
  std::string fbdev;
  bool card0 = false;
  std::string boot_id;
  bool unlocked() const { return loaded && modeset == "Y" && fbdev == "N"; }
  nlohmann::json ToJson() const {
    return {{"loaded", loaded},
            {"modeset", modeset},
            {"fbdev", fbdev},
            {"card0", card0},
            {"mode", unlocked() ? "unlocked" : "default"}};
  }
};

std::string ReadScript(const std::string& sysfs, const std::string& dev) {
  const std::string params = sysfs + "/module/" + kModule + "/parameters";
  return "p=" + ShellQuote(params) +
         "\n"
         "if [ -d \"$p\" ]; then printf 'loaded=1\\nmodeset=%s\\nfbdev=%s\\n' "
         "\"$(cat \"$p/modeset\" 2>/dev/null)\" \"$(cat \"$p/fbdev\" 2>/dev/null)\"; "
         "else echo loaded=0; fi\n"
         "if [ -e " +
         ShellQuote(dev + "/dri/card0") +
         " ]; then echo card0=1; else echo card0=0; fi\n"
         "printf 'boot_id=%s\\n' \"$(cat /proc/sys/kernel/random/boot_id 2>/dev/null)\"\n";
}

ModuleState ParseModuleState(const std::string& out) {
  std::map<std::string, std::string> kv = ParseKeyValues(out);
  ModuleState m;
  m.loaded = kv["loaded"] == "1";
  m.modeset = kv["modeset"];
  m.fbdev = kv["fbdev"];
  m.card0 = kv["card0"] == "1";
  m.boot_id = kv["boot_id"];
  return m;
}

// Kernel prints booleans as Y/N; modprobe takes 1/0.
std::string AsModprobeValue(const std::string& yn) { return yn == "Y" ? "1" : "0"; }

Result<ModuleState> ReadModule(const StepContext& ctx) {
  Result<CommandResult> r = RunOnNode(ctx, ReadScript(ctx.node->sysfs, ctx.node->dev));
  if (!r.ok()) return r.status();
  return ParseModuleState(r->out);
}

// Reloads the module with `options` ("" = unload only). The same commands run
// on every node; the node's PATH decides which modprobe and sudo run.
// Prints "serving=<name>" for each running serving container (nothing when
// the CLI is absent).
std::string ServingScript(const std::string& cli) {
  return "command -v " + ShellQuote(cli) + " >/dev/null 2>&1 && " + ServingContainersCommand(cli) +
         " 2>/dev/null || true\n";
}

// The probe's ServingScript: an installed CLI that cannot list containers
// (the Docker daemon down, the socket not the user's) prints
// "engine_error=<its output>", which the plan turns into an error naming the
// fix: the reload's step would fail on it.
std::string ServingProbeScript(const std::string& cli) {
  return "if command -v " + ShellQuote(cli) + " >/dev/null 2>&1; then\n  dr_out=$(" +
         ServingContainersCommand(cli) +
         " 2>&1) && printf '%s\\n' \"$dr_out\" ||\n"
         "  printf 'engine_error=%s\\n' \"$(printf '%s' \"$dr_out\" | tr '\\n' ' ')\"\nfi\n";
}

// Stops the serving containers the plan listed for this reload, right
// before it; StartServing starts them again after it, whatever its outcome
// (their deployment steps then wait for their health).
Status StopServing(const StepContext& ctx, const nlohmann::json& names) {
  const std::string& cli = ctx.node->container_cli;
  for (const auto& n : names) {
    const std::string name = n.get<std::string>();
    if (ctx.progress) ctx.progress("stopping " + name + " for the nvidia_drm reload");
    Status s = RunOnNode(ctx, "if " + ShellCommand({cli, "container", "inspect", name}) +
                                  " >/dev/null 2>&1; then " +
                                  ShellCommand({cli, "stop", "-t", "30", name}) + " >/dev/null; fi")
                   .status();
    if (!s.ok()) return s;
  }
  return Status::OK();
}

void StartServing(const StepContext& ctx, const nlohmann::json& names) {
  const std::string& cli = ctx.node->container_cli;
  for (const auto& n : names) {
    const std::string name = n.get<std::string>();
    Status s = RunOnNode(ctx, "if " + ShellCommand({cli, "container", "inspect", name}) +
                                  " >/dev/null 2>&1; then " + ShellCommand({cli, "start", name}) +
                                  " >/dev/null; fi")
                   .status();
    if (ctx.progress)
      ctx.progress(s.ok() ? "started " + name + " again"
                          : "starting " + name + " again failed: " + s.message());
  }
}

// Never reload the module under a running serve: the engine would lose its
// GPU. Returns an error naming the containers when any runs.
Status CheckNoServingContainers(const StepContext& ctx) {
  const std::string& cli = ctx.node->container_cli;
  std::string cmd = "command -v " + ShellQuote(cli) + " >/dev/null 2>&1 || exit 0; " +
                    ServingContainersCommand(cli);
  Result<CommandResult> r = ctx.transport->Run(cmd);
  if (!r.ok()) return r.status();
  if (r->exit_code != 0)
    return Status::Error("on " + ctx.node->name + ": cannot list running containers (`" + cmd +
                         "` exited " + std::to_string(r->exit_code) + "): " + r->err);
  std::string names;
  for (const std::string& n : ParseServingContainers(r->out))
    names += (names.empty() ? "" : " ") + n;
  if (names.empty()) return Status::OK();
  return Status::Error("on " + ctx.node->name + ": serving containers run (" + names +
                       "); refusing to reload nvidia_drm under them: stop them first");
}

Status Reload(const StepContext& ctx, bool loaded, const std::vector<std::string>& options,
              bool load, const nlohmann::json& stop) {
  Status stopped = StopServing(ctx, stop);
  if (!stopped.ok()) return stopped;
  Status guard = CheckNoServingContainers(ctx);
  if (!guard.ok()) return guard;
  std::string cmd;
  if (loaded) cmd = ShellCommand({"sudo", "-n", "modprobe", "-r", kModule});
  if (load) {
    std::vector<std::string> argv = {"sudo", "-n", "modprobe", kModule};
    argv.insert(argv.end(), options.begin(), options.end());
    cmd += (cmd.empty() ? "" : " && ") + ShellCommand(argv);
  }
  if (cmd.empty()) return Status::OK();
  if (ctx.progress) ctx.progress(cmd);
  return RunOnNode(ctx, cmd).status();
}

// Puts the module back to `original` (as recorded before an unlock) and
// verifies it.
Status Restore(const StepContext& ctx, const nlohmann::json& original,
               const nlohmann::json& stop = nlohmann::json::array()) {
  Result<ModuleState> now = ReadModule(ctx);
  if (!now.ok()) return now.status();
  const bool want_loaded = original.value("loaded", true);
  const std::string modeset = original.value("modeset", "N");
  const std::string fbdev = original.value("fbdev", "Y");
  if (now->loaded == want_loaded &&
      (!want_loaded || (now->modeset == modeset && now->fbdev == fbdev)))
    return Status::OK();  // already there
  Status s = Reload(ctx, now->loaded,
                    {"modeset=" + AsModprobeValue(modeset), "fbdev=" + AsModprobeValue(fbdev)},
                    want_loaded, stop);
  if (!s.ok()) return s;
  Result<ModuleState> after = ReadModule(ctx);
  if (!after.ok()) return after.status();
  if (after->loaded != want_loaded ||
      (want_loaded && (after->modeset != modeset || after->fbdev != fbdev)))
    return Status::Error(
        "on " + ctx.node->name + ": restore did not take: modeset=" + after->modeset +
        " fbdev=" + after->fbdev + ", expected modeset=" + modeset + " fbdev=" + fbdev);
  return Status::OK();
}

// Free GPU memory as the installed fleet-probe reads it (cuMemGetInfo), or
// null when there is no probe or the figure is unknown: the unlock's gain is
// recorded as measured, never guessed.
nlohmann::json GpuFreeBytes(const StepContext& ctx) {
  Result<CommandResult> r = ctx.transport->Run(
      "cd && [ -x .fleet/bin/fleet-probe ] && timeout 20 .fleet/bin/fleet-probe");
  if (!r.ok() || r->exit_code != 0) return nullptr;
  GpuFacts facts;
  std::string error;
  if (!ParseProbeJson(r->out, &facts, &error) || facts.gpus.empty()) return nullptr;
  uint64_t free = 0;
  for (const GpuInfo& g : facts.gpus) {
    if (!g.memory_free_bytes) return nullptr;
    free += *g.memory_free_bytes;
  }
  return free;
}

std::string Describe(const nlohmann::json& values) {
  return "modeset=" + values.value("modeset", std::string("?")) +
         " fbdev=" + values.value("fbdev", std::string("?"));
}

}  // namespace

std::vector<DesiredResource> DisplayRamProvider::Expand(const Manifest& m) const {
  std::vector<DesiredResource> out;
  for (const auto& [name, spec] : m.nodes) {
    std::vector<std::string> wanted_by;
    if (spec.display_ram == "unlocked") wanted_by.push_back("node " + name);
    for (const auto& [dname, d] : m.deployments) {
      if (d.display_ram != "unlocked") continue;
      for (const std::string& n : d.nodes)
        if (n == name) wanted_by.push_back("deployment " + dname);
    }
    DesiredResource r;
    r.address = "display_ram." + name;
    r.type = "display_ram";
    r.name = name;
    r.node = name;
    r.attributes = {{"mode", wanted_by.empty() ? "default" : "unlocked"}, {"wanted_by", wanted_by}};
    // The probe measures the free GPU memory before and after an unlock.
    r.depends_on = {NodeAddress(name), "probe." + name};
    r.loc = spec.loc;
    out.push_back(std::move(r));
  }
  return out;
}

std::string DisplayRamProvider::ProbeScript(const DesiredResource& r, const NodeSpec& node) const {
  // The serving containers matter only to a reload: listed only when the
  // module is not in the desired mode, so a converged plan does not start
  // the container CLI on every node.
  const std::string params = node.sysfs + "/module/" + kModule + "/parameters";
  return ReadScript(node.sysfs, node.dev) + "dr_p=" + ShellQuote(params) +
         "; dr_m=default\n"
         "if [ \"$(cat \"$dr_p/modeset\" 2>/dev/null)$(cat \"$dr_p/fbdev\" 2>/dev/null)\" = YN ]; "
         "then dr_m=unlocked; fi\n"
         "if [ \"$dr_m\" != " +
         ShellQuote(r.attributes.value("mode", "default")) + " ]; then\n" +
         ServingProbeScript(node.container_cli) + "fi\n";
}

ActualResource DisplayRamProvider::ParseProbe(const DesiredResource&, const std::string& output,
                                              const NodeFacts&) const {
  ActualResource a;
  a.probed = true;
  ModuleState m = ParseModuleState(output);
  a.exists = true;
  a.attributes = m.ToJson();
  a.attributes["serving"] = ParseServingContainers(output);
  const std::string engine_error = ParseKeyValues(output)["engine_error"];
  if (!engine_error.empty()) a.attributes["engine_error"] = engine_error;
  return a;
}

PlanChange DisplayRamProvider::Diff(const DesiredResource& desired, const ActualResource& actual,
                                    const ResourceRecord* record, const DiffContext& ctx) const {
  PlanChange c = DiffModule(desired, actual, record, ctx);
  // A reload under a running serve would take its GPU away: the step stops
  // the serving containers first, and their deployments start them again.
  const nlohmann::json serving = actual.attributes.value("serving", nlohmann::json::array());
  const std::string engine_error = actual.attributes.value("engine_error", "");
  if (c.action != Action::kNoop && !engine_error.empty()) {
    // The reload must list (and stop) the serves first: it cannot.
    const std::string cli = ctx.manifest && ctx.manifest->nodes.count(desired.node)
                                ? ctx.manifest->nodes.at(desired.node).container_cli
                                : "";
    c.error =
        desired.address + ": cannot list the serving containers before the reload: " +
        WithEngineFix(engine_error, cli, desired.node, NodeSshUser(ctx.manifest, desired.node));
    return c;
  }
  if (c.action != Action::kNoop && !serving.empty()) {
    c.detail["stop_containers"] = serving;
    std::string names;
    for (const auto& n : serving) names += (names.empty() ? "" : ", ") + n.get<std::string>();
    c.reasons.push_back("stops the serving containers " + names +
                        " first; their deployments start them again");
  }
  return c;
}

PlanChange DisplayRamProvider::DiffModule(const DesiredResource& desired,
                                          const ActualResource& actual,
                                          const ResourceRecord* record,
                                          const DiffContext& ctx) const {
  const NodeFacts& facts = ctx.facts;
  PlanChange c = ChangeFor(desired);
  const std::string want = desired.attributes.value("mode", "default");
  const nlohmann::json rec = record ? record->attributes : nlohmann::json::object();
  c.before = actual.probed ? actual.attributes : nlohmann::json();
  c.after = c.before;

  if (!actual.probed) {
    // The node is off and will be powered on: it boots at the module default.
    if (want == "unlocked") {
      c.action = Action::kUpdate;
      c.summary = "unlock display RAM after power on";
      c.reasons.push_back("node is off; the module boots at its default");
      c.after = {{"mode", "unlocked"}, {"modeset", "Y"}, {"fbdev", "N"}};
      c.detail = {{"op", "unlock"}};
    }
    return c;
  }
  const std::string have = actual.attributes.value("mode", "default");
  if (have == want) {
    if (want == "default" && rec.value("mode", "") == "unlocked")
      c.reasons.push_back("the recorded unlock is gone (node rebooted): module at boot default");
    return c;
  }
  if (want == "unlocked") {
    c.action = Action::kUpdate;
    c.summary = "unlock display RAM (reload nvidia_drm modeset=1 fbdev=0)";
    c.reasons.push_back("now " + Describe(actual.attributes));
    for (const auto& w : desired.attributes["wanted_by"])
      c.reasons.push_back("wanted by " + w.get<std::string>());
    if (rec.value("mode", "") == "unlocked" && rec.value("boot_id", "") != facts.boot_id)
      c.reasons.push_back(
          "node rebooted since the unlock (boot id changed): the module is back at its boot "
          "default");
    c.after = {{"mode", "unlocked"}, {"modeset", "Y"}, {"fbdev", "N"}};
    c.detail = {{"op", "unlock"}};
    return c;
  }
  // Want default, node is unlocked.
  if (!rec.contains("original")) {
    c.reasons.push_back("unlocked outside fleet (no recorded original values): left as is");
    return c;
  }
  c.action = Action::kUpdate;
  c.summary =
      "restore display RAM to " + Describe(rec["original"]) + " (recorded before the unlock)";
  c.reasons.push_back("no deployment or node setting asks for the unlock any more");
  c.after = rec["original"];
  c.after["mode"] = "default";
  c.detail = {{"op", "restore"}, {"original", rec["original"]}};
  return c;
}

PlanChange DisplayRamProvider::DiffDestroy(const DesiredResource& desired,
                                           const ActualResource& actual,
                                           const ResourceRecord* record,
                                           const DiffContext& ctx) const {
  DesiredResource as_default = desired;
  as_default.attributes["mode"] = "default";
  PlanChange c = Diff(as_default, actual, record, ctx);
  if (c.action == Action::kNoop) c.summary = "nothing to restore";
  return c;
}

Result<nlohmann::json> DisplayRamProvider::Apply(const PlanChange& change,
                                                 const StepContext& ctx) const {
  const nlohmann::json stop = change.detail.value("stop_containers", nlohmann::json::array());
  Result<nlohmann::json> result = ApplyModule(change, ctx, stop);
  StartServing(ctx, stop);
  return result;
}

Result<nlohmann::json> DisplayRamProvider::ApplyModule(const PlanChange& change,
                                                       const StepContext& ctx,
                                                       const nlohmann::json& stop) const {
  const std::string op = change.detail.value("op", "");
  const nlohmann::json rec = ctx.record ? ctx.record->attributes : nlohmann::json::object();
  if (op == "restore") {
    Status s = Restore(ctx, change.detail["original"], stop);
    if (!s.ok()) return s;
    return nlohmann::json();  // nothing left to undo: drop the record
  }
  if (op != "unlock") return Result<nlohmann::json>::Error("unknown display_ram op '" + op + "'");

  Result<ModuleState> now = ReadModule(ctx);
  if (!now.ok()) return now.status();
  // The values to restore later: those found before the first unlock. A
  // re-run after a crash keeps the original recorded by the first attempt.
  nlohmann::json original =
      rec.contains("original") && rec.value("boot_id", "") == now->boot_id
          ? rec["original"]
          : nlohmann::json{
                {"loaded", now->loaded}, {"modeset", now->modeset}, {"fbdev", now->fbdev}};
  nlohmann::json record = {
      {"mode", "unlocking"}, {"original", original}, {"boot_id", now->boot_id}};
  if (!now->unlocked()) {
    record["gpu_free_before_bytes"] = GpuFreeBytes(ctx);
    // Record first: if we die between the reload and the end of the step,
    // the state still knows what to restore.
    Status s = ctx.checkpoint ? ctx.checkpoint(record) : Status::OK();
    if (!s.ok()) return s;
    s = Reload(ctx, now->loaded, {"modeset=1", "fbdev=0"}, true, stop);
    Result<ModuleState> after = ReadModule(ctx);
    if (s.ok() && after.ok() && !after->unlocked())
      s = Status::Error("on " + ctx.node->name + ": unlock did not take: now " +
                        Describe(after->ToJson()) + ", expected modeset=Y fbdev=N");
    if (s.ok() && !after.ok()) s = after.status();
    if (!s.ok()) {
      // Leave nothing half done: put the module back as it was.
      Status r = Restore(ctx, original);
      if (!r.ok()) return Status::Error(s.message() + "; restoring failed too: " + r.message());
      return Status::Error(s.message() + " (module restored to " + Describe(original) + ")");
    }
    record["modeset"] = after->modeset;
    record["fbdev"] = after->fbdev;
    record["card0"] = after->card0;
    record["gpu_free_after_bytes"] = GpuFreeBytes(ctx);
  }
  record["mode"] = "unlocked";
  return record;
}

Status DisplayRamProvider::Undo(const PlanChange& change, const nlohmann::json& applied,
                                const StepContext& ctx, bool* undone) const {
  *undone = false;
  if (change.detail.value("op", "") != "unlock" || !applied.contains("original"))
    return Status::OK();
  // A rollback cannot have announced which serves it stops: those running
  // now (e.g. the one a failed replace put back) are stopped for the reload
  // and started again after it.
  nlohmann::json serving = nlohmann::json::array();
  Result<CommandResult> r = ctx.transport->Run(ServingScript(ctx.node->container_cli));
  if (r.ok())
    for (const std::string& name : ParseServingContainers(r->out)) serving.push_back(name);
  Status s = Restore(ctx, applied["original"], serving);
  StartServing(ctx, serving);
  if (s.ok()) *undone = true;
  return s;
}

}  // namespace fleet
