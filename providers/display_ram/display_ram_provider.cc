#include "providers/display_ram/display_ram_provider.h"

#include <algorithm>
#include <optional>
#include <sstream>

#include "providers/display_ram/display_ram_probe_sh.h"
#include "providers/shared/display_ram_json.h"
#include "providers/shared/engine_check.h"
#include "providers/shared/gpu_facts.h"
#include "providers/shared/serving_containers.h"
#include "src/probe/probe_install.h"
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
  ModuleValues values() const { return {loaded, modeset, fbdev}; }
};

// The embedded display_ram_probe.sh with the module's parameters folder and
// the node's /dev, each quoted once. Without `want` it reads the module's
// state only (a step's check around a reload); with it (and the container
// CLI) it goes on, past a mode other than `want`, to what a reload would
// meet: the serving containers, sudo's answers, what holds the DRM device.
std::string ProbeArgs(const NodeSpec& node, const std::optional<std::string>& want) {
  std::string args = ShellQuote(kModule) + " " +
                     ShellQuote(node.sysfs + "/module/" + kModule + "/parameters") + " " +
                     ShellQuote(node.dev);
  if (want)
    args += " " + ShellQuote(*want) + " " + ShellQuote(node.container_cli) + " " +
            ShellQuote(ServingContainersCommand(node.container_cli));
  return args;
}

std::string ProbeCommand(const NodeSpec& node, const std::optional<std::string>& want = {}) {
  return "sh -c " + ShellQuote(std::string(kDisplayRamProbeScript, kDisplayRamProbeScriptSize)) +
         " fleet-display-ram " + ProbeArgs(node, want) + "\n";
}

// The plan's fragment: the same script inside the probe's own shell, its
// arguments set by `set --`: the fragment's subshell (probe_script.h) ends
// at its `exit`, as `sh -c` did, without a process more on every node of
// every plan (~3.4 ms where a process start is slow, issue 48).
std::string InlineProbe(const NodeSpec& node, const std::string& want) {
  return "set -- " + ProbeArgs(node, want) + "\n" +
         std::string(kDisplayRamProbeScript, kDisplayRamProbeScriptSize) + "\n";
}

ModuleState ParseModuleState(const std::string& out) {
  const std::map<std::string, std::string> kv = ParseKeyValues(out);
  auto field = [&](const char* key) {
    auto it = kv.find(key);
    return it == kv.end() ? std::string() : it->second;
  };
  ModuleState m;
  m.loaded = field("loaded") == "1";
  m.modeset = field("modeset");
  m.fbdev = field("fbdev");
  m.card0 = field("card0") == "1";
  m.boot_id = field("boot_id");
  return m;
}

// Kernel prints booleans as Y/N; modprobe takes 1/0.
std::string AsModprobeValue(const std::string& yn) { return yn == "Y" ? "1" : "0"; }

Result<ModuleState> ReadModule(const StepContext& ctx) {
  Result<CommandResult> r = RunOnNode(ctx, ProbeCommand(*ctx.node));
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

// Stops the serving containers the plan listed for this reload, right
// before it; StartServing starts them again after it, whatever its outcome
// (their deployment steps then wait for their health).
Status StopServing(const StepContext& ctx, const std::vector<std::string>& names) {
  const std::string& cli = ctx.node->container_cli;
  for (const std::string& name : names) {
    if (ctx.progress) ctx.progress("stopping " + name + " for the nvidia_drm reload");
    Status s = RunOnNode(ctx, "if " + ShellCommand({cli, "container", "inspect", name}) +
                                  " >/dev/null 2>&1; then " +
                                  ShellCommand({cli, "stop", "-t", "30", name}) + " >/dev/null; fi")
                   .status();
    if (!s.ok()) return s;
  }
  return Status::OK();
}

void StartServing(const StepContext& ctx, const std::vector<std::string>& names) {
  const std::string& cli = ctx.node->container_cli;
  for (const std::string& name : names) {
    Status s = RunOnNode(ctx, "if " + ShellCommand({cli, "container", "inspect", name}) +
                                  " >/dev/null 2>&1; then " + ShellCommand({cli, "start", name}) +
                                  " >/dev/null; fi")
                   .status();
    if (ctx.progress)
      ctx.progress(s.ok() ? "started " + name + " again"
                          : "starting " + name + " again failed: " + s.message());
  }
}

// display_manager: stop: the units holding the DRM device, stopped right
// before a reload; started again after the restore.
Status StopUnits(const StepContext& ctx, const std::vector<std::string>& units) {
  for (const std::string& u : units) {
    const std::string cmd = ShellCommand({"sudo", "-n", "systemctl", "stop", u});
    if (ctx.progress) ctx.progress(cmd + " (display_manager: stop)");
    Status s = RunOnNode(ctx, cmd).status();
    if (!s.ok()) return s;
  }
  return Status::OK();
}

void StartUnits(const StepContext& ctx, const std::vector<std::string>& units) {
  for (const std::string& u : units) {
    const std::string cmd = ShellCommand({"sudo", "-n", "systemctl", "start", u});
    Status s = RunOnNode(ctx, cmd).status();
    if (ctx.progress)
      ctx.progress(s.ok() ? "started " + u + " again"
                          : "starting " + u + " failed: " + s.message());
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
              bool load, const std::vector<std::string>& stop) {
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
  // One reload at a time on a node: an apply killed mid-reload leaves its
  // remote command running (sshd does not stop it), and a second apply's
  // `modprobe -r` beside it would leave the module unloaded.
  return RunOnNode(
             ctx, "mkdir -p .fleet && " + ShellCommand({"flock", "-w", "900",
                                                        ".fleet/nvidia_drm.lock", "sh", "-c", cmd}))
      .status();
}

// Puts the module back to `original` (as recorded before an unlock) and
// verifies it.
Status Restore(const StepContext& ctx, const ModuleValues& original,
               const std::vector<std::string>& stop = {}) {
  Result<ModuleState> now = ReadModule(ctx);
  if (!now.ok()) return now.status();
  const bool want_loaded = original.loaded;
  const std::string& modeset = original.modeset;
  const std::string& fbdev = original.fbdev;
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
std::optional<uint64_t> GpuFreeBytes(const StepContext& ctx) {
  const std::string probe = ShellQuote(kProbeInstallPath);
  Result<CommandResult> r = ctx.transport->Run("cd && [ -x " + probe + " ] && timeout 20 " + probe);
  if (!r.ok() || r->exit_code != 0) return std::nullopt;
  GpuFacts facts;
  std::string error;
  if (!ParseProbeJson(r->out, &facts, &error) || facts.gpus.empty()) return std::nullopt;
  uint64_t free = 0;
  for (const GpuInfo& g : facts.gpus) {
    if (!g.memory_free_bytes) return std::nullopt;
    free += *g.memory_free_bytes;
  }
  return free;
}

std::string Describe(const std::string& modeset, const std::string& fbdev) {
  return "modeset=" + modeset + " fbdev=" + fbdev;
}

std::string Describe(const ModuleValues& v) { return Describe(v.modeset, v.fbdev); }

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
    r.attributes = DisplayRamWant{wanted_by.empty() ? kModeDefault : kModeUnlocked, wanted_by};
    // The probe measures the free GPU memory before and after an unlock.
    r.depends_on = {NodeAddress(name), "probe." + name};
    r.loc = spec.loc;
    out.push_back(std::move(r));
  }
  return out;
}

std::string DisplayRamProvider::ProbeScript(const DesiredResource& r, const NodeSpec& node) const {
  return InlineProbe(node, r.attributes.get<DisplayRamWant>().mode);
}

ActualResource DisplayRamProvider::ParseProbe(const DesiredResource&, const std::string& output,
                                              const NodeFacts&) const {
  ActualResource a;
  a.probed = true;
  ModuleState m = ParseModuleState(output);
  a.exists = true;
  std::map<std::string, std::string> kv = ParseKeyValues(output);
  DisplayRamFound found{m.loaded,
                        m.modeset,
                        m.fbdev,
                        m.card0,
                        m.unlocked() ? kModeUnlocked : kModeDefault,
                        ParseServingContainers(output),
                        kv["engine_error"]};
  found.sudo_checked = kv["sudo_checked"] == "1";
  found.modprobe_path = kv["modprobe_path"];
  found.sudo_user = kv["sudo_user"];
  std::istringstream lines(output);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("sudo_ok=", 0) == 0) found.sudo_allowed.push_back(line.substr(8));
    if (line.rfind("drm_holder=", 0) == 0) found.drm_holders.push_back(line.substr(11));
    if (line.rfind("drm_unit_sudo_ok=", 0) == 0) found.units_sudo_ok.push_back(line.substr(17));
    if (line.rfind("drm_systemctl=", 0) == 0) found.systemctl_path = line.substr(14);
    if (line.rfind("drm_unit=", 0) == 0 &&
        std::find(found.drm_holder_units.begin(), found.drm_holder_units.end(), line.substr(9)) ==
            found.drm_holder_units.end())
      found.drm_holder_units.push_back(line.substr(9));
  }
  a.attributes = found;
  return a;
}

namespace {

// The plan's error when the node's sudo would ask for a password for a
// reload this change runs (fleet's `sudo -n` cannot answer one: the apply
// would fail half way, a destroy would leave the node on): the commands,
// and the drop-in that allows exactly fleet's reloads of this node. ""
// when sudo allows them, or when it was not asked (a node that is off).
std::string SudoRefusal(const PlanChange& c, const DisplayRamFound& f, const std::string& address,
                        const std::string& node) {
  if (!f.sudo_checked || !c.detail.is_object()) return "";
  const DisplayRamStep step = c.detail.get<DisplayRamStep>();
  std::vector<std::string> need;
  if (f.loaded) need.push_back(std::string("-r ") + kModule);
  // What a restore puts back: the recorded values, or (an unlock) what the
  // node has now, which the unlock records.
  std::string restore = std::string(kModule) + " modeset=" + AsModprobeValue(f.modeset) +
                        " fbdev=" + AsModprobeValue(f.fbdev);
  if (step.op == kOpUnlock) {
    need.push_back(std::string(kModule) + " modeset=1 fbdev=0");
  } else if (step.original) {
    restore = std::string(kModule) + " modeset=" + AsModprobeValue(step.original->modeset) +
              " fbdev=" + AsModprobeValue(step.original->fbdev);
    if (step.original->loaded) need.push_back(restore);
  }
  std::string refused;
  for (const std::string& args : need)
    if (std::find(f.sudo_allowed.begin(), f.sudo_allowed.end(), args) == f.sudo_allowed.end())
      refused +=
          (refused.empty() ? "`sudo -n " : ", `sudo -n ") + f.modprobe_path + " " + args + "`";
  if (refused.empty()) return "";
  const std::string mp = f.modprobe_path;
  return address + ": sudo on " + node + " asks " + f.sudo_user + " for a password for " + refused +
         " (fleet cannot answer one: the reload would fail half way). Install this drop-in "
         "on " +
         node + " (`sudo visudo -f /etc/sudoers.d/fleet`), nothing broader:\n    " + f.sudo_user +
         " ALL=(root) NOPASSWD: " + mp + " -r " + kModule + ", " + mp + " " + kModule +
         " modeset=1 fbdev=0" +
         (restore == std::string(kModule) + " modeset=1 fbdev=0" ? "" : ", " + mp + " " + restore);
}

// The plan's error when something holds the DRM device open under a reload
// that unloads nvidia_drm (`modprobe -r` would fail: the module is in
// use): what holds it, its unit, and the fix. "" when nothing does (or
// the module is not loaded).
std::string HolderRefusal(const PlanChange& c, const DisplayRamFound& f, const std::string& address,
                          const std::string& dev) {
  if (c.action == Action::kNoop || !f.loaded || f.drm_holders.empty()) return "";
  std::string held, stop;
  for (const std::string& h : f.drm_holders) held += (held.empty() ? "" : ", ") + h;
  for (const std::string& u : f.drm_holder_units) stop += (stop.empty() ? "" : " ") + u;
  const std::string fix =
      (stop.empty() ? "Stop that process first"
                    : "Stop it first (`sudo systemctl stop " + stop +
                          "`; start it again after the display RAM is restored), or declare "
                          "`display_manager: stop` on the node (fleet stops it for the unlock "
                          "and starts it after the restore)") +
      ", or run the node headless (`sudo systemctl set-default multi-user.target`)";
  // Before an unlock (modeset=N) there is no card0 yet: the display manager
  // takes the one the unlock makes, and with it the memory the unlock frees.
  if (!f.card0)
    return address + ": " + held + " would open the " + dev +
           "/dri/card0 the unlock makes: it would hold the display memory the unlock frees, and "
           "the restore's `modprobe -r nvidia_drm` would then fail (the module in use). " +
           fix;
  return address + ": " + dev + "/dri/card* is held open by " + held +
         ": the reload's `modprobe -r nvidia_drm` would fail (the module is in use). " + fix;
}

}  // namespace

namespace {

// The node's paths.dev, as the probe read the DRM device there.
std::string NodeDev(const DiffContext& ctx, const std::string& node) {
  if (ctx.manifest && ctx.manifest->nodes.count(node)) return ctx.manifest->nodes.at(node).dev;
  return "/dev";
}

std::string HolderNote(const DisplayRamFound& f) {
  std::string held;
  for (const std::string& h : f.drm_holders) held += (held.empty() ? "" : ", ") + h;
  return "the DRM device is held open by " + held +
         ": the restore will fail, and the power off "
         "that follows resets nvidia_drm anyway";
}

bool StopsDisplayManager(const DiffContext& ctx, const std::string& node) {
  return ctx.manifest && ctx.manifest->nodes.count(node) &&
         ctx.manifest->nodes.at(node).display_manager_stop;
}

// display_manager: stop runs `sudo -n systemctl stop UNIT` and `start
// UNIT`: a sudo that would ask a password for them is the plan's error,
// with the line to add.
std::string UnitSudoRefusal(const DisplayRamFound& f, const std::string& address,
                            const std::string& node) {
  std::string lines;
  for (const std::string& u : f.drm_holder_units) {
    if (std::find(f.units_sudo_ok.begin(), f.units_sudo_ok.end(), u) != f.units_sudo_ok.end())
      continue;
    lines += (lines.empty() ? "" : ", ") + f.systemctl_path + " stop " + u + ", " +
             f.systemctl_path + " start " + u;
  }
  if (lines.empty()) return "";
  return address + ": sudo on " + node + " asks " + f.sudo_user +
         " for a password to stop and start the display manager (display_manager: stop). Add "
         "to the drop-in on " +
         node + " (`sudo visudo -f /etc/sudoers.d/fleet`), nothing broader:\n    " + f.sudo_user +
         " ALL=(root) NOPASSWD: " + lines;
}

bool PowerOffFollows(const std::string& node, const DiffContext& ctx) {
  if (ctx.planned == nullptr) return false;
  for (const PlanChange& n : *ctx.planned)
    if (n.node == node && PowersNodeOff(n)) return true;
  return false;
}

}  // namespace

PlanChange DisplayRamProvider::Diff(const DesiredResource& desired, const ActualResource& actual,
                                    const ResourceRecord* record, const DiffContext& ctx) const {
  bool held_open = false;
  return DiffTellingHeld(desired, actual, record, ctx, &held_open);
}

PlanChange DisplayRamProvider::DiffTellingHeld(const DesiredResource& desired,
                                               const ActualResource& actual,
                                               const ResourceRecord* record, const DiffContext& ctx,
                                               bool* held_open) const {
  *held_open = false;
  PlanChange c = DiffModule(desired, actual, record, ctx);
  // A reload under a running serve would take its GPU away: the step stops
  // the serving containers first, and their deployments start them again.
  const DisplayRamFound found = actual.attributes.get<DisplayRamFound>();
  const std::vector<std::string>& serving = found.serving;
  if (c.action != Action::kNoop && !found.engine_error.empty()) {
    // The reload must list (and stop) the serves first: it cannot.
    const std::string cli = ctx.manifest && ctx.manifest->nodes.count(desired.node)
                                ? ctx.manifest->nodes.at(desired.node).container_cli
                                : "";
    c.error = desired.address + ": cannot list the serving containers before the reload: " +
              WithEngineFix(found.engine_error, cli, desired.node,
                            NodeSshUser(ctx.manifest, desired.node));
    return c;
  }
  if (c.action != Action::kNoop) {
    if (std::string why = SudoRefusal(c, found, desired.address, desired.node); !why.empty()) {
      c.error = why;
      return c;
    }
    if (StopsDisplayManager(ctx, desired.node) && !found.drm_holder_units.empty() && found.loaded) {
      if (std::string why = UnitSudoRefusal(found, desired.address, desired.node); !why.empty()) {
        c.error = why;
        return c;
      }
      DisplayRamStep step = c.detail.get<DisplayRamStep>();
      step.stop_units = found.drm_holder_units;
      c.detail = step;
      std::string units;
      for (const std::string& u : found.drm_holder_units) units += (units.empty() ? "" : " ") + u;
      c.reasons.push_back("stops " + units +
                          " (display_manager: stop: it holds the DRM device) for the reload; "
                          "starts it again after the display RAM is restored");
    } else if (std::string why =
                   HolderRefusal(c, found, desired.address, NodeDev(ctx, desired.node));
               !why.empty()) {
      c.error = why;
      // With a card0 to hold, the holder keeps the restore's modprobe -r
      // from running; without one it only would, after an unlock.
      *held_open = found.card0;
      return c;
    }
  }
  if (c.action != Action::kNoop && !serving.empty()) {
    DisplayRamStep step = c.detail.get<DisplayRamStep>();
    step.stop_containers = serving;
    c.detail = step;
    std::string names;
    for (const std::string& n : serving) names += (names.empty() ? "" : ", ") + n;
    c.reasons.push_back("stops the serving containers " + names +
                        " first; their deployments start them again");
  }
  return c;
}

namespace {

using Decision = std::optional<PlanChange>;

// What every decision of a display_ram diff reads.
struct DisplayRamDiffInput {
  const DisplayRamWant& want;
  const DisplayRamFound& found;
  const DisplayRamRecord& record;  // empty when there is none
  const ActualResource& actual;
  const NodeFacts& facts;
  const PlanChange& base;
};

PlanChange Unlock(const PlanChange& base, std::string summary) {
  PlanChange c = base;
  c.action = Action::kUpdate;
  c.summary = std::move(summary);
  c.after = UnlockedAfterJson();
  c.detail = DisplayRamStep{kOpUnlock, std::nullopt, {}};
  return c;
}

// The node is off and will be powered on: it boots at the module default.
Decision NodeIsOff(const DisplayRamDiffInput& in) {
  if (in.actual.probed) return std::nullopt;
  if (in.want.mode != kModeUnlocked) return in.base;
  PlanChange c = Unlock(in.base, "unlock display RAM after power on");
  c.reasons.push_back("node is off; the module boots at its default");
  return c;
}

Decision AlreadyInMode(const DisplayRamDiffInput& in) {
  if (in.found.mode != in.want.mode) return std::nullopt;
  PlanChange c = in.base;
  if (in.want.mode == kModeDefault && in.record.mode == kModeUnlocked)
    c.reasons.push_back("the recorded unlock is gone (node rebooted): module at boot default");
  return c;
}

Decision UnlockWanted(const DisplayRamDiffInput& in) {
  if (in.want.mode != kModeUnlocked) return std::nullopt;
  PlanChange c = Unlock(in.base, "unlock display RAM (reload nvidia_drm modeset=1 fbdev=0)");
  c.reasons.push_back("now " + Describe(in.found.modeset, in.found.fbdev));
  for (const std::string& w : in.want.wanted_by) c.reasons.push_back("wanted by " + w);
  if (in.record.mode == kModeUnlocked && in.record.boot_id != in.facts.boot_id)
    c.reasons.push_back(
        "node rebooted since the unlock (boot id changed): the module is back at its boot "
        "default");
  return c;
}

// Want default, the node is unlocked: restore what the unlock recorded, or
// leave an unlock fleet did not make.
PlanChange RestoreWanted(const DisplayRamDiffInput& in) {
  PlanChange c = in.base;
  if (!in.record.original) {
    c.reasons.push_back("unlocked outside fleet (no recorded original values): left as is");
    return c;
  }
  const ModuleValues& original = *in.record.original;
  c.action = Action::kUpdate;
  c.summary = "restore display RAM to " + Describe(original) + " (recorded before the unlock)";
  c.reasons.push_back("no deployment or node setting asks for the unlock any more");
  c.after = ModuleAfterJson(kModeDefault, original);
  DisplayRamStep step{kOpRestore, original, {}};
  step.start_units = in.record.stopped_units;
  c.detail = step;
  if (!step.start_units.empty()) {
    std::string units;
    for (const std::string& u : step.start_units) units += (units.empty() ? "" : " ") + u;
    c.reasons.push_back("starts " + units + " again after the restore (the unlock stopped it)");
  }
  return c;
}

}  // namespace

PlanChange DisplayRamProvider::DiffModule(const DesiredResource& desired,
                                          const ActualResource& actual,
                                          const ResourceRecord* record,
                                          const DiffContext& ctx) const {
  PlanChange base = ChangeFor(desired);
  base.before = actual.probed ? actual.attributes : nlohmann::json();
  // What sudo allows is the probe's answer for the plan's check, not a
  // value of the module: not shown as one.
  if (base.before.is_object()) base.before.erase("sudo");
  if (base.before.is_object()) base.before.erase("drm_holders");
  base.after = base.before;
  const DisplayRamWant want = desired.attributes.get<DisplayRamWant>();
  const DisplayRamFound found = actual.attributes.get<DisplayRamFound>();
  const DisplayRamRecord rec =
      record ? record->attributes.get<DisplayRamRecord>() : DisplayRamRecord();
  const DisplayRamDiffInput in{want, found, rec, actual, ctx.facts, base};
  if (auto c = NodeIsOff(in)) return *c;
  if (auto c = AlreadyInMode(in)) return *c;
  if (auto c = UnlockWanted(in)) return *c;
  return RestoreWanted(in);
}

PlanChange DisplayRamProvider::DiffDestroy(const DesiredResource& desired,
                                           const ActualResource& actual,
                                           const ResourceRecord* record,
                                           const DiffContext& ctx) const {
  DesiredResource as_default = desired;
  DisplayRamWant want = desired.attributes.get<DisplayRamWant>();
  want.mode = kModeDefault;
  as_default.attributes = want;
  bool held_open = false;
  PlanChange c = DiffTellingHeld(as_default, actual, record, ctx, &held_open);
  if (c.action == Action::kNoop) c.summary = "nothing to restore";
  // A held DRM device fails the restore, not the power off that follows it.
  if (held_open && PowerOffFollows(desired.node, ctx)) c.error.clear();
  if (c.action == Action::kNoop || !c.error.empty() || ctx.planned == nullptr) return c;
  // The node's change is planned before this one (the node's type comes
  // first): a restore that fails must not keep a shift-end power off from
  // running.
  for (const PlanChange& n : *ctx.planned)
    if (n.node == desired.node && PowersNodeOff(n)) {
      const DisplayRamFound found = actual.attributes.get<DisplayRamFound>();
      if (!found.drm_holders.empty()) c.reasons.push_back(HolderNote(found));
      DisplayRamStep step = c.detail.get<DisplayRamStep>();
      step.power_off_follows = true;
      c.detail = step;
      c.reasons.push_back(
          "if the restore fails, the power off still runs: the reboot brings nvidia_drm back "
          "to its boot default (the unlock is per boot)");
    }
  return c;
}

Result<nlohmann::json> DisplayRamProvider::Apply(const PlanChange& change,
                                                 const StepContext& ctx) const {
  const DisplayRamStep step = change.detail.get<DisplayRamStep>();
  Result<nlohmann::json> result = ApplyModule(step, ctx);
  StartServing(ctx, step.stop_containers);
  return result;
}

namespace {

// The reload that unlocks, recorded first (a checkpoint: if fleet dies
// between the reload and the end of the step, the state still knows what
// to restore), verified after; on failure the module is put back.
Status ReloadUnlocked(const StepContext& ctx, const ModuleState& now,
                      const std::vector<std::string>& stop, DisplayRamRecord* record) {
  record->reloaded = true;
  record->gpu_free_before_bytes = GpuFreeBytes(ctx);
  Status s = ctx.checkpoint ? ctx.checkpoint(nlohmann::json(*record)) : Status::OK();
  if (!s.ok()) return s;
  s = Reload(ctx, now.loaded, {"modeset=1", "fbdev=0"}, true, stop);
  Result<ModuleState> after = ReadModule(ctx);
  if (s.ok() && after.ok() && !after->unlocked())
    s = Status::Error("on " + ctx.node->name + ": unlock did not take: now " +
                      Describe(after->modeset, after->fbdev) + ", expected modeset=Y fbdev=N");
  if (s.ok() && !after.ok()) s = after.status();
  if (!s.ok()) {
    // Leave nothing half done: put the module back as it was.
    Status r = Restore(ctx, *record->original);
    // The restore is the latest word on the node: it answered, or not.
    if (!r.ok()) return r.Reworded(s.message() + "; restoring failed too: " + r.message());
    return Status::Error(s.message() + " (module restored to " + Describe(*record->original) + ")");
  }
  record->read_back = true;
  record->modeset = after->modeset;
  record->fbdev = after->fbdev;
  record->card0 = after->card0;
  record->gpu_free_after_bytes = GpuFreeBytes(ctx);
  return Status::OK();
}

}  // namespace

Result<nlohmann::json> DisplayRamProvider::ApplyModule(const DisplayRamStep& step,
                                                       const StepContext& ctx) const {
  if (step.op == kOpRestore) {
    Status s = StopUnits(ctx, step.stop_units);
    if (s.ok()) s = Restore(ctx, step.original.value_or(ModuleValues()), step.stop_containers);
    if (s.ok()) {
      std::vector<std::string> start = step.start_units;
      for (const std::string& u : step.stop_units)
        if (std::find(start.begin(), start.end(), u) == start.end()) start.push_back(u);
      StartUnits(ctx, start);
    }
    if (!s.ok() && step.power_off_follows && ctx.record != nullptr) {
      // The power off that follows restores it by construction; the record
      // stays, so that a power off that fails too is still known.
      if (ctx.progress)
        ctx.progress("restore failed (" + s.message() +
                     "); the power off that follows resets it (the unlock is per boot)");
      return ctx.record->attributes;
    }
    if (!s.ok()) return s;
    return nlohmann::json();  // nothing left to undo: drop the record
  }
  if (step.op != kOpUnlock)
    return Result<nlohmann::json>::Error("unknown display_ram op '" + step.op + "'");
  const DisplayRamRecord prior =
      ctx.record ? ctx.record->attributes.get<DisplayRamRecord>() : DisplayRamRecord();
  Result<ModuleState> now = ReadModule(ctx);
  if (!now.ok()) return now.status();
  // The values to restore later: those found before the first unlock. A
  // re-run after a crash keeps the original recorded by the first attempt.
  DisplayRamRecord record;
  record.mode = "unlocking";
  record.original =
      prior.original && prior.boot_id == now->boot_id ? *prior.original : now->values();
  record.boot_id = now->boot_id;
  if (prior.boot_id == now->boot_id) record.stopped_units = prior.stopped_units;
  if (!now->unlocked()) {
    // display_manager: stop: recorded before they stop, so that a restore
    // after a crash still starts them.
    for (const std::string& u : step.stop_units)
      if (std::find(record.stopped_units.begin(), record.stopped_units.end(), u) ==
          record.stopped_units.end())
        record.stopped_units.push_back(u);
    Status s = StopUnits(ctx, step.stop_units);
    if (s.ok()) s = ReloadUnlocked(ctx, *now, step.stop_containers, &record);
    if (!s.ok()) {
      StartUnits(ctx, step.stop_units);  // the module is back as it was: so is its display
      return s;
    }
  }
  record.mode = kModeUnlocked;
  return nlohmann::json(record);
}

Status DisplayRamProvider::Undo(const PlanChange& change, const nlohmann::json& applied,
                                const StepContext& ctx, bool* undone) const {
  *undone = false;
  const DisplayRamRecord record = applied.get<DisplayRamRecord>();
  if (change.detail.get<DisplayRamStep>().op != kOpUnlock || !record.original) return Status::OK();
  // A rollback cannot have announced which serves it stops: those running
  // now (e.g. the one a failed replace put back) are stopped for the reload
  // and started again after it.
  std::vector<std::string> serving;
  Result<CommandResult> r = ctx.transport->Run(ServingScript(ctx.node->container_cli));
  if (r.ok()) serving = ParseServingContainers(r->out);
  Status s = Restore(ctx, *record.original, serving);
  StartServing(ctx, serving);
  if (s.ok()) *undone = true;
  return s;
}

}  // namespace fleet
