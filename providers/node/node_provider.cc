#include "providers/node/node_provider.h"

#include <chrono>
#include <nlohmann/json.hpp>
#include <sstream>
#include <utility>

#include "providers/node/engine_listing.h"
#include "providers/node/node_gpu_sh.h"
#include "providers/node/node_identity_sh.h"
#include "providers/node/poweroff_sudo_sh.h"
#include "providers/shared/fabric_facts.h"
#include "providers/shared/gpu_facts.h"
#include "providers/shared/image_listing.h"
#include "providers/shared/node_script.h"
#include "src/power_switch.h"
#include "src/probe/fleet_probe_source.h"
#include "src/probe/probe_install.h"
#include "src/shell_quote.h"
#include "state/state.h"

namespace fleet {

namespace {

NodeRecord IdentityRecord(const NodeFacts& f) {
  NodeRecord r;
  r.hostname = f.hostname;
  r.machine_id = f.machine_id;
  r.arch = f.arch;
  r.power = kPowerOn;
  return r;
}

NodeRecord PowerRecord(const std::string& power) {
  NodeRecord r;
  r.power = power;
  return r;
}

// Polls `ok` every 500 ms of `clock` until it returns true or `timeout_s`
// passes.
bool WaitFor(Clock* clock, int timeout_s, const std::function<bool()>& ok) {
  auto deadline = clock->SteadyNow() + std::chrono::seconds(timeout_s);
  while (true) {
    if (ok()) return true;
    if (clock->SteadyNow() >= deadline) return false;
    clock->SleepFor(std::chrono::milliseconds(500));
  }
}

Result<NodeFacts> ReadFacts(Transport* t, const NodeSpec& spec) {
  Result<CommandResult> r = t->Run(NodeFactsScript(spec.sysfs, spec.container_cli));
  if (!r.ok()) return r.status();
  if (r->exit_code != 0)
    return Result<NodeFacts>::Error(t->Describe() + ": reading node facts exited " +
                                    std::to_string(r->exit_code) + ": " + r->err);
  NodeFacts f = ParseNodeFacts(r->out);
  f.reachable = true;
  return f;
}

}  // namespace

std::string NodeFactsScript(const std::string& sysfs, const std::string& cli,
                            GpuContextMode gpu_context, bool list_images) {
  // Inline fragments, not `sh -c`: the probe runs on every node on every
  // plan, and a process more costs each node a few ms. Their values go in
  // on one line of quoted assignments (node_gpu.sh's header names them).
  // The listing first: the images' CLI runs (when it comes to that) go on
  // in the background while fleet-probe and the fabric are read.
  std::string beside = kFindProbeScript;
  beside += ScriptWithValues({{"ngf_version_file", ShellQuote(kProbeVersionFile)},
                              {"ngf_install_path", ShellQuote(kProbeInstallPath)},
                              {"ngf_source_sha", ShellQuote(kFleetProbeSourceSha256)},
                              {"ngf_context", ShellQuote(GpuContextScript(gpu_context))},
                              {"ngf_drop_caches", ShellQuote(DropCachesSudoScript())}},
                             kNodeGpuScript, kNodeGpuScriptSize);
  beside += FabricFactsScript(sysfs);
  return std::string(kNodeIdentityScript, kNodeIdentityScriptSize) +
         EngineListingScript(cli, list_images, beside, gpu_context);
}

NodeFacts ParseNodeFacts(const std::string& output) {
  NodeFacts f;
  f.reachable = true;
  // gpu_smi repeats (one line per GPU); everything else is key=value once.
  std::string smi_csv;
  std::istringstream in(output);
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("gpu_smi=", 0) == 0) smi_csv += line.substr(8) + "\n";
  std::map<std::string, std::string> kv = ParseKeyValues(output);
  f.hostname = kv["hostname"];
  f.machine_id = kv["machine_id"];
  f.boot_id = kv["boot_id"];
  f.arch = kv["arch"];
  f.kernel = kv["kernel"];
  f.fabric = FabricPortsToJson(ParseFabricPorts(output));
  const EngineApiListing api = ParseEngineApi(output);
  if (api.images_listed)
    f.images = api.images.ToJson();
  else if (kv.count("images"))
    f.images = ParseImageListing(output).ToJson();
  const ServeListing serves = api.present ? api.serves : ParseServeListing(kv["fleet_serves"]);
  f.fleet_serves_listed = serves.listed;
  f.fleet_serves = serves.names;
  // On the API's path the node knew only that a serve runs, not its name.
  if (api.present && kv["gpu_context"] == "serving:")
    for (const std::string& n : serves.names) kv["gpu_context"] += n + " ";
  const std::string& probe_json = kv["gpu_probe"];
  GpuFacts gpu;
  std::string error;
  if (!probe_json.empty() && ParseProbeJson(probe_json, &gpu, &error)) {
    // The probe's own refusal (a process holds a GPU) where it gave one.
    if (gpu.context_decision.empty()) gpu.context_decision = ParseGpuContext(kv["gpu_context"]).why;
    ParseDropCachesSudo(kv, &gpu);
    if (gpu.probe_elapsed_ns) f.gpu_probe_s = *gpu.probe_elapsed_ns / 1e9;
    f.gpu = GpuFactsToJson(gpu);
  } else if (!smi_csv.empty() && ParseNvidiaSmiCsv(smi_csv, &gpu, &error)) {
    f.gpu = GpuFactsToJson(gpu);
  } else {
    gpu.source = "none";
    gpu.note = error.empty() ? "no GPU found (no fleet-probe, no nvidia-smi)" : error;
    f.gpu = GpuFactsToJson(gpu);
  }
  return f;
}

std::string CheckNodeIdentity(const std::string& node, const std::string& where,
                              const std::string& expected_hostname, const NodeFacts& facts,
                              const NodeRecord& recorded) {
  if (!expected_hostname.empty() && facts.hostname != expected_hostname) {
    return "node " + node + ": the machine at " + where + " says its hostname is '" +
           facts.hostname + "', the manifest expects '" + expected_hostname +
           "'; refusing to touch it (is the address pointing at another box?)";
  }
  std::string rec_id = recorded.machine_id.value_or("");
  if (!rec_id.empty() && !facts.machine_id.empty() && rec_id != facts.machine_id) {
    return "node " + node + ": machine id changed (state recorded " + rec_id + ", the machine at " +
           where + " has " + facts.machine_id +
           "); this is a different or reinstalled box. If that is intended, run: fleet state rm "
           "node." +
           node;
  }
  return "";
}

static std::string Endpoint(const NodeSpec& spec) {
  return spec.address + ":" + std::to_string(spec.ssh.port);
}

namespace {

// The plan's decisions, one each. Every one fills `c` (its before already
// set) and returns it.

// Sets `c` to run step `op`, leaving the node recorded as `after`.
PlanChange Planned(PlanChange c, Action action, const std::string& summary,
                   const std::string& reason, const NodeRecord& after, const char* op) {
  c.action = action;
  c.summary = summary;
  c.reasons.push_back(reason);
  c.after = after;
  c.detail = NodeStep{op};
  return c;
}

PlanChange Unchanged(PlanChange c, const std::string& summary = "") {
  c.summary = summary;
  c.after = c.before;
  return c;
}

// Unreachable and declared on: power it on if a switch is declared.
PlanChange DecidePowerOnUnreachable(PlanChange c, const std::string& node, const NodeWant& want,
                                    const NodeFacts& facts, bool recorded) {
  if (!want.power_switch) {
    // Why it is unreachable is the plan's Unreachable line for the node.
    c.error = "node " + node +
              " is unreachable, and no power switch is declared for it, so fleet cannot power "
              "it on";
    return c;
  }
  return Planned(std::move(c), recorded ? Action::kUpdate : Action::kCreate,
                 "power on (switch " + *want.power_switch + ")",
                 "node does not answer SSH: " + facts.unreachable_reason, PowerRecord(kPowerOn),
                 kOpPowerOn);
}

// Reachable but declared off.
PlanChange DecidePowerOff(PlanChange c) {
  return Planned(std::move(c), Action::kUpdate, "power off",
                 "node is on; the manifest declares power: off", PowerRecord(kPowerOff),
                 kOpPowerOff);
}

// Reachable and declared on: its identity must match, then it is recorded.
PlanChange DecideAdoption(PlanChange c, const std::string& node, const NodeWant& want,
                          const NodeFacts& facts, const std::optional<NodeRecord>& recorded) {
  std::string err =
      CheckNodeIdentity(node, want.endpoint, want.hostname, facts, recorded.value_or(NodeRecord{}));
  if (!err.empty()) {
    c.error = err;
    return c;
  }
  if (!recorded)
    return Planned(std::move(c), Action::kCreate, "adopt node (record its identity)",
                   "not in state yet", IdentityRecord(facts), kOpAdopt);
  if (recorded->power.value_or("") == kPowerOff ||
      recorded->hostname.value_or("") != facts.hostname)
    return Planned(std::move(c), Action::kUpdate, "record node identity",
                   "state is out of date with the node", IdentityRecord(facts), kOpAdopt);
  return Unchanged(std::move(c));
}

// The node's switch as the plan read it (NodeFacts::power_switch_*): an
// entity the controller does not know or cannot reach ("unavailable") is
// an error now, not after a power on waited out boot_timeout; so is one
// that reads off under a node that answers (another node's entity: the
// log's copy-paste of switch.dgx3 onto dgx4). A controller that did not
// answer matters only to a plan that switches this node.
PlanChange CheckSwitch(PlanChange c, const std::string& node, const NodeWant& want,
                       const NodeFacts& facts) {
  if (!want.power_switch || !c.error.empty()) return c;
  const std::string& entity = *want.power_switch;
  const bool switches = c.detail.is_object() && c.detail.get<NodeStep>().op != kOpAdopt;
  if (!facts.power_switch_error.empty()) {
    if (facts.power_switch_refused || switches)
      c.error = "node " + node + ": cannot read its power switch " + entity + ": " +
                facts.power_switch_error;
    return c;
  }
  const std::string& state = facts.power_switch_state;
  if (state.empty()) return c;
  if (std::string why = UnusableSwitchState(state); !why.empty()) {
    c.error = "node " + node + ": its power switch " + entity + " is unusable: " + why +
              "; fleet could not power it on or off";
    return c;
  }
  if (facts.reachable && state == kPowerOff) {
    c.error = "node " + node + " answers SSH, but its power switch " + entity + " reads off: is " +
              entity + " another node's switch? (check nodes." + node + ".power.switch)";
    return c;
  }
  return c;
}

// A node whose SSH is quiet while its switch still reads on, and that the
// plan wants off: its OS is down (or halting), its power is not; the step
// switches it off (after power.halt_wait).
PlanChange SwitchOffQuietNode(PlanChange c, const NodeWant& want, const NodeFacts& facts,
                              const std::string& why) {
  return Planned(std::move(c), Action::kUpdate,
                 "power off (SSH is quiet; switch " + *want.power_switch + " still on)",
                 why + "; SSH does not answer but " + *want.power_switch + " reads " +
                     facts.power_switch_state,
                 PowerRecord(kPowerOff), kOpPowerOff);
}

// A power off of a node whose OS answers runs its poweroff command with
// `sudo -n`: a sudo that would ask for a password is a plan error, not a
// power off that fails after the serves were stopped.
PlanChange CheckPoweroffSudo(PlanChange c, const std::string& node, const ActualResource& actual,
                             const NodeFacts& facts) {
  if (!c.error.empty() || !facts.reachable || !c.detail.is_object()) return c;
  if (c.detail.get<NodeStep>().op != kOpPowerOff) return c;
  if (std::string why = PoweroffSudoRefusal(node, PoweroffSudoOf(actual.attributes)); !why.empty())
    c.error = why;
  return c;
}

bool QuietButSwitchedOn(const NodeWant& want, const NodeFacts& facts) {
  return want.power_switch && !facts.reachable && facts.power_switch_state == kPowerOn;
}

// The node's change before its switch is considered.
PlanChange Decide(PlanChange c, const std::string& node, const NodeWant& want,
                  const NodeFacts& facts, const std::optional<NodeRecord>& recorded) {
  if (!facts.reachable && want.power == kPowerOff && QuietButSwitchedOn(want, facts))
    return SwitchOffQuietNode(std::move(c), want, facts, "the manifest declares power: off");
  if (!facts.reachable && want.power == kPowerOff)
    return Unchanged(std::move(c), "powered off, as declared");
  if (!facts.reachable && want.power == kPowerOnDemand && facts.power_switch_state == kPowerOff) {
    // A note of the plan: nothing on the node is read or changed meanwhile.
    c.reasons.push_back(
        "asleep (power: on_demand; switch off): nothing on it is planned; a "
        "request through a gateway with wake powers it on");
    return Unchanged(std::move(c), "asleep (power: on_demand)");
  }
  if (!facts.reachable)
    return DecidePowerOnUnreachable(std::move(c), node, want, facts, recorded.has_value());
  if (want.power == kPowerOff) return DecidePowerOff(std::move(c));
  return DecideAdoption(std::move(c), node, want, facts, recorded);
}

}  // namespace

std::vector<DesiredResource> NodeProvider::Expand(const Manifest& m) const {
  std::vector<DesiredResource> out;
  for (const auto& [name, spec] : m.nodes) {
    DesiredResource r;
    r.address = NodeAddress(name);
    r.type = "node";
    r.name = name;
    r.node = name;
    NodeWant want;
    want.hostname = spec.hostname;
    want.endpoint = Endpoint(spec);
    want.power = spec.power.present ? spec.power.state : kPowerOn;
    if (spec.power.present) want.power_switch = spec.power.switch_entity;
    r.attributes = want;
    r.loc = spec.loc;
    out.push_back(std::move(r));
  }
  return out;
}

std::string DescribeNodeFabric(const NodeSpec& spec, const NodeFacts& facts) {
  const std::vector<FabricPort> ports = FabricPortsFromJson(facts.fabric);
  const FabricEndpoint e = ResolveFabric(spec.fabric_address, spec.fabric_interface, ports);
  std::string s = "fabric:     ";
  if (!e.usable()) {
    s += "none (" + e.note + "): copies from and to this node go through the controller\n";
  } else {
    s += e.address + (e.Subnet().empty() ? "" : " (" + e.Subnet() + ")") + " on " +
         (e.interface.empty() ? "?" : e.interface) + ", from the " + e.source;
    if (e.gid_index >= 0) s += ", RoCE v2 GID index " + std::to_string(e.gid_index);
    if (!e.hcas.empty()) {
      s += ", HCA";
      for (const std::string& h : e.hcas) s += " " + h;
    }
    s += "\n";
    if (!e.note.empty()) s += "            note: " + e.note + "\n";
  }
  for (const FabricPort& p : ports) s += "  port      " + DescribeFabricPort(p) + "\n";
  return s;
}

std::vector<std::string> PoweroffSudoArgv(const std::string& command) {
  std::vector<std::string> words;
  std::istringstream in(command);
  for (std::string w; in >> w;) {
    // Only plain words: anything the shell would expand or split is not
    // what a sudoers line can name.
    if (w.find_first_of("'\"\\$`;&|<>(){}*?[]~#=") != std::string::npos) return {};
    words.push_back(w);
  }
  if (words.empty() || words[0] != "sudo") return {};
  size_t i = 1;
  // sudo's options that take no argument (-n, -E, ...); one that takes
  // one (-u root) is not what fleet's default runs: not checked.
  for (; i < words.size() && words[i].size() > 1 && words[i][0] == '-'; ++i)
    if (words[i] == "--") {
      ++i;
      break;
    } else if (words[i].find_first_of("ugCDhprtUTR") != std::string::npos) {
      return {};
    }
  return std::vector<std::string>(words.begin() + static_cast<std::ptrdiff_t>(i), words.end());
}

std::string PoweroffSudoScript(const std::vector<std::string>& argv) {
  if (argv.empty()) return "";
  std::vector<std::string> call = {"poweroff_sudo"};
  call.insert(call.end(), argv.begin(), argv.end());
  return std::string(kPoweroffSudoScript, kPoweroffSudoScriptSize) + ShellCommand(call) + "\n";
}

PoweroffSudo ParsePoweroffSudo(const std::string& output) {
  std::map<std::string, std::string> kv = ParseKeyValues(output);
  PoweroffSudo v;
  if (!kv.count("poweroff_sudo")) return v;
  v.checked = true;
  v.allowed = kv["poweroff_sudo"] == "allowed";
  v.user = kv["poweroff_sudo_user"];
  v.command = kv["poweroff_sudo_command"];
  return v;
}

std::string PoweroffSudoRefusal(const std::string& node, const PoweroffSudo& sudo) {
  if (!sudo.checked || sudo.allowed) return "";
  const std::string user = sudo.user.empty() ? "the SSH user" : sudo.user;
  return "node " + node + ": sudo on " + node + " asks " + user + " for a password for `sudo -n " +
         sudo.command +
         "` (fleet cannot answer one: the power off would fail after the serves stopped). "
         "Install this drop-in on " +
         node + " (`sudo visudo -f /etc/sudoers.d/fleet`), nothing broader:\n    " + user +
         " ALL=(root) NOPASSWD: " + sudo.command;
}

// The plan's node probe also lists the node's images, once for every image
// resource on it and for the images no state knows (image_listing.h). On a
// node with a switch it asks sudo about the poweroff command: every plan
// may be a destroy's.
std::string NodeProvider::ProbeScript(const DesiredResource&, const NodeSpec& spec) const {
  std::string script = NodeFactsScript(spec.sysfs, spec.container_cli, GpuContextMode::kAuto, true);
  if (spec.power.present) script += PoweroffSudoScript(PoweroffSudoArgv(spec.poweroff_command));
  return script;
}

DeclaredPower NodeProvider::PowerOf(const DesiredResource& r) const {
  const NodeWant want = r.attributes.get<NodeWant>();
  if (want.power == kPowerOff) return DeclaredPower::kOff;
  if (want.power == kPowerOnDemand) return DeclaredPower::kOnDemand;
  return DeclaredPower::kOn;
}

std::string NodeProvider::TakesDown(const PlanChange& c) const {
  if (c.action == Action::kNoop || c.detail.get<NodeStep>().op != kOpPowerOff) return "";
  return "power off";
}

ActualResource NodeProvider::ParseProbe(const DesiredResource&, const std::string& output,
                                        const NodeFacts& facts) const {
  ActualResource a;
  a.probed = true;
  a.exists = facts.reachable;
  NodeRecord found = IdentityRecord(facts);
  if (!facts.reachable) {
    found = PowerRecord(kPowerOff);
    found.unreachable = facts.unreachable_reason;
  }
  a.attributes = found;
  if (facts.reachable) PutPoweroffSudo(a.attributes, ParsePoweroffSudo(output));
  return a;
}

PlanChange NodeProvider::Diff(const DesiredResource& desired, const ActualResource& actual,
                              const ResourceRecord* record, const DiffContext& ctx) const {
  const NodeFacts& facts = ctx.facts;
  const NodeWant want = desired.attributes.get<NodeWant>();
  std::optional<NodeRecord> recorded;
  if (record) recorded = record->attributes.get<NodeRecord>();
  PlanChange c = ChangeFor(desired);
  c.before = record ? record->attributes : nlohmann::json();

  return CheckPoweroffSudo(CheckSwitch(Decide(std::move(c), desired.name, want, facts, recorded),
                                       desired.name, want, facts),
                           desired.name, actual, facts);
}

Result<nlohmann::json> NodeProvider::Adopt(const DesiredResource& desired,
                                           const ActualResource& actual, const DiffContext& ctx,
                                           const StepContext*) const {
  using R = Result<nlohmann::json>;
  const PlanChange c = Diff(desired, actual, nullptr, ctx);
  if (!c.error.empty()) return R::Error(c.error);
  if (!ctx.facts.reachable) return R::Error(desired.name + " does not answer; apply powers it on");
  if (c.detail.get<NodeStep>().op != kOpAdopt)
    return R::Error("the plan would " + c.summary + " first");
  return c.after;
}

PlanChange NodeProvider::DiffDestroy(const DesiredResource& desired, const ActualResource& actual,
                                     const ResourceRecord* record, const DiffContext& ctx) const {
  return CheckPoweroffSudo(DestroyChange(desired, record, ctx), desired.name, actual, ctx.facts);
}

PlanChange NodeProvider::DestroyChange(const DesiredResource& desired, const ResourceRecord* record,
                                       const DiffContext& ctx) const {
  const NodeWant want = desired.attributes.get<NodeWant>();
  PlanChange c = ChangeFor(desired);
  c.before = record ? record->attributes : nlohmann::json();
  if (!want.power_switch) return Unchanged(std::move(c), "left on (no power switch declared)");
  if (QuietButSwitchedOn(want, ctx.facts))
    return CheckSwitch(SwitchOffQuietNode(std::move(c), want, ctx.facts,
                                          "destroy powers off nodes that have a switch"),
                       desired.name, want, ctx.facts);
  if (!ctx.facts.reachable)
    return CheckSwitch(Unchanged(std::move(c), "already off"), desired.name, want, ctx.facts);
  return CheckSwitch(
      Planned(std::move(c), Action::kUpdate,
              "power off (shut down, then switch " + *want.power_switch + " off)",
              "destroy powers off nodes that have a switch", PowerRecord(kPowerOff), kOpPowerOff),
      desired.name, want, ctx.facts);
}

namespace {

// The apply's steps, one each.

// Switches the node on and waits for SSH to answer.
Status PowerOnStep(const StepContext& ctx) {
  const NodeSpec& spec = *ctx.node;
  if (ctx.power == nullptr) return Status::Error("no power controller configured");
  if (ctx.progress) ctx.progress("switching " + spec.power.switch_entity + " on");
  Status s = ctx.power->TurnOn(spec.power.switch_entity);
  if (s.ok()) s = ConfirmSwitched(ctx.power, spec.power.switch_entity, kPowerOn, ctx.clock);
  if (!s.ok()) return s.Prefixed("node " + spec.name);
  if (ctx.progress) ctx.progress("waiting for SSH to answer");
  Status last;
  if (!WaitFor(ctx.clock, spec.power.boot_timeout_s, [&] {
        last = ctx.transport->Connect();
        return last.ok();
      })) {
    return Status::Error("node " + spec.name + " did not answer SSH within " +
                         std::to_string(spec.power.boot_timeout_s) +
                         "s after power on: " + last.message());
  }
  return Status();
}

// Runs the node's poweroff command and waits until SSH stops answering.
Status ShutDownOs(const StepContext& ctx) {
  const NodeSpec& spec = *ctx.node;
  if (ctx.progress) ctx.progress("shutting down: " + spec.poweroff_command);
  Result<CommandResult> r = ctx.transport->Run(spec.poweroff_command);
  // The connection may drop as the node goes down: that is success.
  if (r.ok() && r->exit_code != 0)
    return Status::Error("`" + spec.poweroff_command + "` exited " + std::to_string(r->exit_code) +
                         ": " + r->err);
  if (!WaitFor(ctx.clock, spec.power.shutdown_timeout_s, [&] {
        Result<CommandResult> ping = ctx.transport->Run("true");
        return !ping.ok();
      })) {
    return Status::Error("node " + spec.name + " still answers SSH " +
                         std::to_string(spec.power.shutdown_timeout_s) +
                         "s after shutdown; not switching power off under a running OS");
  }
  return Status();
}

// Shuts the OS down when it answers, then gives it power.halt_wait to halt:
// sshd stops early in a shutdown, before the disks are unmounted, so cutting
// the power the moment SSH goes quiet can cut that last write. A node that
// does not answer at all may be halting too (shut down since the plan). One
// that answers but fails the host-key check or the login runs an OS fleet
// cannot shut down, so its power stays on (a changed key was once switched
// off).
Status ShutdownStep(const StepContext& ctx) {
  const NodeSpec& spec = *ctx.node;
  Status connected = ctx.transport->Connect();
  if (!connected.ok() && !connected.unreachable())
    return Status::Error(connected.message() +
                         "; not switching power off: the node answers but fleet cannot shut "
                         "its OS down");
  if (connected.ok()) {
    Status down = ShutDownOs(ctx);
    if (!down.ok()) return down;
  }
  if (spec.power.halt_wait_s > 0) {
    if (ctx.progress)
      ctx.progress("SSH is quiet; waiting " + std::to_string(spec.power.halt_wait_s) +
                   " s (power.halt_wait) for the OS to halt");
    ctx.clock->SleepFor(std::chrono::seconds(spec.power.halt_wait_s));
  }
  return Status();
}

// Shuts the node down, then switches it off; the record keeps its identity.
Result<nlohmann::json> PowerOffStep(const StepContext& ctx, NodeRecord recorded) {
  if (ctx.power == nullptr) return Result<nlohmann::json>::Error("no power controller configured");
  Status s = ShutdownStep(ctx);
  if (!s.ok()) return s;
  if (ctx.progress) ctx.progress("switching " + ctx.node->power.switch_entity + " off");
  s = ctx.power->TurnOff(ctx.node->power.switch_entity);
  // Read back: a switch that did not follow fails the step now, with what
  // it reads, and the record keeps the node on.
  if (s.ok()) s = ConfirmSwitched(ctx.power, ctx.node->power.switch_entity, kPowerOff, ctx.clock);
  if (!s.ok()) return s.Prefixed("node " + ctx.node->name);
  recorded.power = kPowerOff;
  return nlohmann::json(recorded);
}

// Reads the identity again, checks it, and records it.
Result<nlohmann::json> AdoptStep(const StepContext& ctx, const NodeRecord& recorded) {
  const NodeSpec& spec = *ctx.node;
  Result<NodeFacts> facts = ReadFacts(ctx.transport, spec);
  if (!facts.ok()) return facts.status();
  std::string err = CheckNodeIdentity(spec.name, Endpoint(spec), spec.hostname, *facts, recorded);
  if (!err.empty()) return Result<nlohmann::json>::Error(err);
  return nlohmann::json(IdentityRecord(*facts));
}

}  // namespace

Result<nlohmann::json> NodeProvider::Apply(const PlanChange& change, const StepContext& ctx) const {
  const NodeStep step = change.detail.get<NodeStep>();
  NodeRecord recorded;
  if (ctx.record) recorded = ctx.record->attributes.get<NodeRecord>();

  if (step.op == kOpPowerOff) return PowerOffStep(ctx, recorded);
  if (step.op == kOpPowerOn) {
    Status s = PowerOnStep(ctx);
    if (!s.ok()) return s;
  }
  return AdoptStep(ctx, recorded);  // adopt, and the end of power_on
}

}  // namespace fleet
