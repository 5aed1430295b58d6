#include "providers/probe/probe_provider.h"

#include <sys/utsname.h>
#include <unistd.h>

#include <fstream>
#include <optional>
#include <sstream>

#include "providers/probe/probe_installed_sh.h"
#include "providers/probe/probe_json.h"
#include "providers/shared/node_script.h"
#include "src/probe/fleet_probe_source.h"
#include "src/probe/probe_binaries.h"
#include "src/probe/probe_install.h"
#include "src/shell_quote.h"

namespace fleet {

namespace {

// Beside the probe (src/probe/probe_install.h), relative to the node user's home.
constexpr const char* kSourceFile = ".fleet/src/fleet_probe.cc";

std::string ControllerArch() {
  struct utsname u;
  return uname(&u) == 0 ? u.machine : "";
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The fleet-probe build fleet carries for ARCH; "" when none.
std::string_view EmbeddedBinary(const std::string& arch) {
  static const std::vector<EmbeddedProbe> probes = EmbeddedProbes();
  for (const EmbeddedProbe& p : probes)
    if (p.arch == arch) return p.binary;
  return {};
}

// Upload needs a build for the node's architecture: one fleet carries, or
// the one beside a fleet of the node's architecture.
bool CanUpload(const std::string& arch) {
  return !EmbeddedBinary(arch).empty() || (arch == ControllerArch() && !LocalProbeBinary().empty());
}

std::string UploadSummary(const std::string& arch) {
  if (!EmbeddedBinary(arch).empty())
    return "install fleet-probe (upload the " + arch + " build fleet carries)";
  return "install fleet-probe (upload the controller's " + ControllerArch() + " build)";
}

// A binary that cannot start on the node: the loader or the C library
// refuses it (an older glibc, no such loader, another architecture), as
// opposed to a probe that starts and fails.
bool RefusedToStart(const CommandResult& run) {
  if (run.exit_code == 126 || run.exit_code == 127) return true;
  for (const char* sign : {"GLIBC_", "GLIBCXX_", "cannot execute", "Exec format error",
                           "error while loading shared libraries", "not found"})
    if (run.err.find(sign) != std::string::npos) return true;
  return false;
}

}  // namespace

std::string LocalProbeBinary() {
  char self[4096];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) return "";
  self[n] = 0;
  std::string dir(self);
  dir = dir.substr(0, dir.rfind('/'));
  for (const std::string& candidate : {dir + "/fleet-probe", dir + "/../probe/fleet-probe"})
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  return "";
}

std::vector<DesiredResource> ProbeProvider::Expand(const Manifest& m) const {
  std::vector<DesiredResource> out;
  for (const auto& [name, spec] : m.nodes) {
    DesiredResource r;
    r.address = "probe." + name;
    r.type = "probe";
    r.name = name;
    r.node = name;
    r.attributes = ProbeWant{kFleetProbeSourceSha256};
    r.depends_on = {NodeAddress(name)};
    r.loc = spec.loc;
    out.push_back(std::move(r));
  }
  return out;
}

std::string ProbeProvider::ProbeScript(const DesiredResource&, const NodeSpec&) const {
  return ScriptWithValues(
      {{"pi_probe", ShellQuote(kProbeInstallPath)}, {"pi_version", ShellQuote(kProbeVersionFile)}},
      kProbeInstalledScript, kProbeInstalledScriptSize);
}

// The node's architecture comes from the node facts, read once per plan.
ActualResource ProbeProvider::ParseProbe(const DesiredResource&, const std::string& output,
                                         const NodeFacts& facts) const {
  ActualResource a;
  a.probed = true;
  std::map<std::string, std::string> kv = ParseKeyValues(output);
  a.exists = kv.count("installed") > 0;
  auto field = [&](const char* key) {
    auto it = kv.find(key);
    return it == kv.end() ? std::string() : it->second;
  };
  a.attributes = ProbeFound{field("installed"), facts.arch, field("compiler")};
  return a;
}

namespace {

using Decision = std::optional<PlanChange>;

// Node off, to be powered on: install once it is up.
Decision NodeIsOff(const ActualResource& actual, const DiffContext& ctx, const PlanChange& base) {
  if (actual.probed) return std::nullopt;
  PlanChange c = base;
  if (ctx.facts.reachable) return c;
  c.action = Action::kCreate;
  c.summary = "install fleet-probe after power on";
  c.detail = ProbeStep{kMethodAuto};
  return c;
}

Decision Installed(const ActualResource& actual, const ProbeFound& found, const ProbeWant& want,
                   const PlanChange& base) {
  if (!actual.exists || found.source_sha256 != want.source_sha256) return std::nullopt;
  PlanChange c = base;
  c.after = c.before;
  return c;
}

// Upload a build of the node's architecture (one fleet carries, or the
// controller's own), else compile on the node; "" when neither can be done.
std::string InstallMethod(const ProbeFound& found) {
  if (CanUpload(found.arch)) return kMethodUpload;
  if (!found.compiler.empty()) return kMethodCompile;
  return "";
}

// Not an error: node facts fall back to nvidia-smi, with GPU memory
// reported as unknown rather than zero.
Decision CannotInstall(const DesiredResource& desired, const ProbeFound& found,
                       const std::string& method, const PlanChange& base) {
  if (!method.empty()) return std::nullopt;
  PlanChange c = base;
  c.reasons.push_back("cannot install fleet-probe on " + desired.node + " (" + found.arch +
                      ", controller " + ControllerArch() +
                      ", no c++ on the node): GPU memory stays unknown");
  c.after = c.before;
  return c;
}

}  // namespace

PlanChange ProbeProvider::Diff(const DesiredResource& desired, const ActualResource& actual,
                               const ResourceRecord*, const DiffContext& ctx) const {
  PlanChange c;
  c.address = desired.address;
  c.type = desired.type;
  c.node = desired.node;
  const ProbeWant want = desired.attributes.get<ProbeWant>();
  const ProbeFound found = actual.attributes.get<ProbeFound>();
  c.before = actual.exists ? nlohmann::json(ProbeWant{found.source_sha256}) : nlohmann::json();
  c.after = want;
  if (auto d = NodeIsOff(actual, ctx, c)) return *d;
  if (auto d = Installed(actual, found, want, c)) return *d;
  const std::string method = InstallMethod(found);
  if (auto d = CannotInstall(desired, found, method, c)) return *d;
  c.action = actual.exists ? Action::kUpdate : Action::kCreate;
  c.summary = method == kMethodUpload
                  ? UploadSummary(found.arch)
                  : "install fleet-probe (compile on the node, " + found.arch + ")";
  c.reasons.push_back(actual.exists ? "installed probe is another version"
                                    : "fleet-probe is not installed: GPU memory comes from "
                                      "the CUDA driver only through it");
  c.detail = ProbeStep{method};
  return c;
}

namespace {

Status UploadProbe(const StepContext& ctx, const std::string& node_arch) {
  std::string_view embedded = EmbeddedBinary(node_arch);
  std::string local;
  if (embedded.empty()) {
    local = ReadFile(LocalProbeBinary());
    if (local.empty()) return Status::Error("cannot read the local fleet-probe");
    embedded = local;
  }
  return ctx.transport->WriteFile(kProbeInstallPath, embedded, 0755);
}

Status CompileProbe(const StepContext& ctx) {
  Status s = ctx.transport->WriteFile(
      kSourceFile,
      std::string_view(reinterpret_cast<const char*>(kFleetProbeSource), kFleetProbeSourceSize),
      0644);
  if (!s.ok()) return s;
  return RunOnNode(ctx, ShellCommand({"c++", "-O2", "-std=c++17", kSourceFile, "-ldl", "-pthread",
                                      "-o", std::string(kProbeInstallPath) + ".tmp"}) +
                            " && " +
                            ShellCommand({"mv", "-f", std::string(kProbeInstallPath) + ".tmp",
                                          kProbeInstallPath}))
      .status();
}

// The installed probe runs and prints its JSON document.
Result<CommandResult> RunInstalled(const StepContext& ctx) {
  return ctx.transport->Run(kProbeInstallPath);
}

bool Answers(const CommandResult& run) {
  return run.exit_code == 0 && run.out.find("\"probe_version\"") != std::string::npos;
}

std::string FirstLine(const std::string& text) { return text.substr(0, text.find('\n')); }

}  // namespace

// Upload (or compile), then run it once. An uploaded build the node's
// loader or C library refuses is compiled from source instead, the reason
// shown and recorded (`fallback`), where the node has a compiler.
Result<nlohmann::json> ProbeProvider::Apply(const PlanChange& change,
                                            const StepContext& ctx) const {
  std::string method = change.detail.get<ProbeStep>().method;
  Result<CommandResult> arch = ctx.transport->Run("uname -m");
  if (!arch.ok()) return arch.status();
  std::string node_arch = FirstLine(arch->out);
  if (method == kMethodAuto) method = CanUpload(node_arch) ? kMethodUpload : kMethodCompile;

  Status s = RunOnNode(ctx, ShellCommand({"mkdir", "-p", kProbeInstallDir, ".fleet/src"})).status();
  if (!s.ok()) return s;
  s = method == kMethodUpload ? UploadProbe(ctx, node_arch) : CompileProbe(ctx);
  if (!s.ok()) return s;
  s = ctx.transport->WriteFile(kProbeVersionFile, std::string(kFleetProbeSourceSha256) + "\n",
                               0644);
  if (!s.ok()) return s;
  Result<CommandResult> run = RunInstalled(ctx);
  if (!run.ok()) return run.status();
  std::string fallback;
  if (!Answers(*run) && method == kMethodUpload && RefusedToStart(*run)) {
    fallback = "the uploaded " + node_arch + " build does not start on the node (" +
               FirstLine(run->err.empty() ? "exit " + std::to_string(run->exit_code) : run->err) +
               "): compiled from source there";
    if (ctx.progress) ctx.progress(fallback);
    s = CompileProbe(ctx);
    if (!s.ok())
      return Result<nlohmann::json>::Error("on " + ctx.node->name + ": " + fallback +
                                           " failed: " + s.message());
    method = kMethodCompile;
    run = RunInstalled(ctx);
    if (!run.ok()) return run.status();
  }
  if (!Answers(*run))
    return Result<nlohmann::json>::Error("on " + ctx.node->name +
                                         ": the installed fleet-probe does not run: " + run->err);
  return nlohmann::json(ProbeRecord{kFleetProbeSourceSha256, method, node_arch, fallback});
}

}  // namespace fleet
