#include "providers/node/node_provider.h"

#include <chrono>
#include <sstream>
#include <thread>

#include "providers/node/fabric_facts.h"
#include "providers/node/gpu_facts.h"
#include "src/power_switch.h"
#include "src/shell_quote.h"
#include "state/state.h"

namespace fleet {

namespace {

// Where `fleet` installs its node-side probe (see the probe@<node> step).
constexpr const char* kProbeInstallPath = "$HOME/.fleet/bin/fleet-probe";

std::string Field(const nlohmann::json& j, const char* key) {
  if (!j.is_object() || !j.contains(key) || !j[key].is_string()) return "";
  return j[key].get<std::string>();
}

nlohmann::json IdentityRecord(const NodeFacts& f) {
  return {
      {"hostname", f.hostname}, {"machine_id", f.machine_id}, {"arch", f.arch}, {"power", "on"}};
}

// Polls `ok` every 500 ms until it returns true or `timeout_s` passes.
bool WaitFor(int timeout_s, const std::function<bool()>& ok) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  while (true) {
    if (ok()) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
}

Result<NodeFacts> ReadFacts(Transport* t) {
  Result<CommandResult> r = t->Run(NodeFactsScript());
  if (!r.ok()) return r.status();
  if (r->exit_code != 0)
    return Result<NodeFacts>::Error(t->Describe() + ": reading node facts exited " +
                                    std::to_string(r->exit_code) + ": " + r->err);
  NodeFacts f = ParseNodeFacts(r->out);
  f.reachable = true;
  return f;
}

}  // namespace

std::string NodeFactsScript(const std::string& sysfs) {
  // uname -n is the UTS name (what `hostname` prints) and needs no package.
  // GPU: the fleet-probe when installed (it reads cuMemGetInfo, which works on
  // unified-memory GB10 where nvidia-smi says [N/A]); else nvidia-smi.
  std::string s =
      "printf 'hostname=%s\\n' \"$(uname -n)\"\n"
      "printf 'machine_id=%s\\n' \"$(cat /etc/machine-id 2>/dev/null)\"\n"
      "printf 'boot_id=%s\\n' \"$(cat /proc/sys/kernel/random/boot_id 2>/dev/null)\"\n"
      "printf 'arch=%s\\n' \"$(uname -m)\"\n"
      "printf 'kernel=%s\\n' \"$(uname -r)\"\n";
  s += std::string("fp=\"") + kProbeInstallPath +
       "\"; [ -x \"$fp\" ] || fp=$(command -v fleet-probe 2>/dev/null)\n"
       // A driver hung in cuInit must not hang the whole plan.
       "t=; command -v timeout >/dev/null 2>&1 && t='timeout 20'\n"
       "if [ -n \"$fp\" ] && [ -x \"$fp\" ]; then printf 'gpu_probe=%s\\n' \"$($t \"$fp\" "
       "2>/dev/null "
       "| tr -d '\\n')\"\n"
       "elif command -v nvidia-smi >/dev/null 2>&1; then nvidia-smi "
       "--query-gpu=index,name,uuid,memory.total,memory.free,driver_version "
       "--format=csv,noheader,nounits 2>/dev/null | sed 's/^/gpu_smi=/'\n"
       "fi\n";
  s += FabricFactsScript(sysfs);
  return s;
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
  const std::string& probe_json = kv["gpu_probe"];
  GpuFacts gpu;
  std::string error;
  if (!probe_json.empty() && ParseProbeJson(probe_json, &gpu, &error)) {
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
                              const nlohmann::json& recorded) {
  if (!expected_hostname.empty() && facts.hostname != expected_hostname) {
    return "node " + node + ": the machine at " + where + " says its hostname is '" +
           facts.hostname + "', the manifest expects '" + expected_hostname +
           "'; refusing to touch it (is the address pointing at another box?)";
  }
  std::string rec_id = Field(recorded, "machine_id");
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

std::vector<DesiredResource> NodeProvider::Expand(const Manifest& m) const {
  std::vector<DesiredResource> out;
  for (const auto& [name, spec] : m.nodes) {
    DesiredResource r;
    r.address = NodeAddress(name);
    r.type = "node";
    r.name = name;
    r.node = name;
    r.attributes = {{"hostname", spec.hostname}, {"endpoint", Endpoint(spec)}};
    r.attributes["power"] = spec.power.present ? spec.power.state : "on";
    if (spec.power.present) r.attributes["switch"] = spec.power.switch_entity;
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

std::string NodeProvider::ProbeScript(const DesiredResource&, const NodeSpec& spec) const {
  return NodeFactsScript(spec.sysfs);
}

ActualResource NodeProvider::ParseProbe(const DesiredResource&, const std::string&,
                                        const NodeFacts& facts) const {
  ActualResource a;
  a.probed = true;
  a.exists = facts.reachable;
  if (facts.reachable) {
    a.attributes = IdentityRecord(facts);
  } else {
    a.attributes = {{"power", "off"}, {"unreachable", facts.unreachable_reason}};
  }
  return a;
}

PlanChange NodeProvider::Diff(const DesiredResource& desired, const ActualResource& actual,
                              const ResourceRecord* record, const DiffContext& ctx) const {
  const NodeFacts& facts = ctx.facts;
  PlanChange c = ChangeFor(desired);
  const std::string want_power = desired.attributes.value("power", "on");
  const bool has_switch = desired.attributes.contains("switch");
  nlohmann::json recorded = record ? record->attributes : nlohmann::json::object();
  c.before = record ? record->attributes : nlohmann::json();

  if (!facts.reachable) {
    if (want_power == "off") {
      c.summary = "powered off, as declared";
      c.after = c.before;
      return c;
    }
    if (!has_switch) {
      c.error = "node " + desired.name + " is unreachable: " + facts.unreachable_reason +
                " (no power switch is declared for it, so fleet cannot power it on)";
      return c;
    }
    c.action = record ? Action::kUpdate : Action::kCreate;
    c.summary = "power on (switch " + desired.attributes["switch"].get<std::string>() + ")";
    c.reasons.push_back("node does not answer SSH: " + facts.unreachable_reason);
    c.after = {{"power", "on"}};
    c.detail = {{"op", "power_on"}};
    return c;
  }

  if (want_power == "off") {
    c.action = Action::kUpdate;
    c.summary = "power off";
    c.reasons.push_back("node is on; the manifest declares power: off");
    c.after = {{"power", "off"}};
    c.detail = {{"op", "power_off"}};
    return c;
  }

  // Reachable and should be on: identity decides.
  (void)actual;
  std::string err = CheckNodeIdentity(desired.name, desired.attributes.value("endpoint", ""),
                                      desired.attributes.value("hostname", ""), facts, recorded);
  if (!err.empty()) {
    c.error = err;
    return c;
  }
  if (!record) {
    c.action = Action::kCreate;
    c.summary = "adopt node (record its identity)";
    c.reasons.push_back("not in state yet");
    c.after = IdentityRecord(facts);
    c.detail = {{"op", "adopt"}};
    return c;
  }
  if (Field(recorded, "power") == "off" || Field(recorded, "hostname") != facts.hostname) {
    c.action = Action::kUpdate;
    c.summary = "record node identity";
    c.reasons.push_back("state is out of date with the node");
    c.after = IdentityRecord(facts);
    c.detail = {{"op", "adopt"}};
    return c;
  }
  c.after = c.before;
  return c;
}

PlanChange NodeProvider::DiffDestroy(const DesiredResource& desired, const ActualResource&,
                                     const ResourceRecord* record, const DiffContext& ctx) const {
  const NodeFacts& facts = ctx.facts;
  PlanChange c = ChangeFor(desired);
  c.before = record ? record->attributes : nlohmann::json();
  c.after = c.before;
  if (!desired.attributes.contains("switch")) {
    c.summary = "left on (no power switch declared)";
    return c;
  }
  if (!facts.reachable) {
    c.summary = "already off";
    return c;
  }
  c.action = Action::kUpdate;
  c.summary = "power off (shut down, then switch " +
              desired.attributes["switch"].get<std::string>() + " off)";
  c.reasons.push_back("destroy powers off nodes that have a switch");
  c.after = {{"power", "off"}};
  c.detail = {{"op", "power_off"}};
  return c;
}

Result<nlohmann::json> NodeProvider::Apply(const PlanChange& change, const StepContext& ctx) const {
  const std::string op = change.detail.value("op", "adopt");
  const NodeSpec& spec = *ctx.node;
  nlohmann::json recorded = ctx.record ? ctx.record->attributes : nlohmann::json::object();

  if (op == "power_on") {
    if (ctx.power == nullptr)
      return Result<nlohmann::json>::Error("no power controller configured");
    if (ctx.progress) ctx.progress("switching " + spec.power.switch_entity + " on");
    Status s = ctx.power->TurnOn(spec.power.switch_entity);
    if (!s.ok()) return s;
    if (ctx.progress) ctx.progress("waiting for SSH to answer");
    Status last;
    if (!WaitFor(spec.power.boot_timeout_s, [&] {
          last = ctx.transport->Connect();
          return last.ok();
        })) {
      return Result<nlohmann::json>::Error("node " + spec.name + " did not answer SSH within " +
                                           std::to_string(spec.power.boot_timeout_s) +
                                           "s after power on: " + last.message());
    }
  }

  if (op == "power_off") {
    if (ctx.power == nullptr)
      return Result<nlohmann::json>::Error("no power controller configured");
    if (ctx.transport->Connect().ok()) {
      if (ctx.progress) ctx.progress("shutting down: " + spec.poweroff_command);
      Result<CommandResult> r = ctx.transport->Run(spec.poweroff_command);
      // The connection may drop as the node goes down: that is success.
      if (r.ok() && r->exit_code != 0)
        return Result<nlohmann::json>::Error("`" + spec.poweroff_command + "` exited " +
                                             std::to_string(r->exit_code) + ": " + r->err);
      if (!WaitFor(spec.power.shutdown_timeout_s, [&] {
            Result<CommandResult> ping = ctx.transport->Run("true");
            return !ping.ok();
          })) {
        return Result<nlohmann::json>::Error(
            "node " + spec.name + " still answers SSH " +
            std::to_string(spec.power.shutdown_timeout_s) +
            "s after shutdown; not switching power off under a running OS");
      }
    }
    if (ctx.progress) ctx.progress("switching " + spec.power.switch_entity + " off");
    Status s = ctx.power->TurnOff(spec.power.switch_entity);
    if (!s.ok()) return s;
    nlohmann::json rec = recorded.is_object() ? recorded : nlohmann::json::object();
    rec["power"] = "off";
    return rec;
  }

  // adopt (and the end of power_on): read identity again, check it, record.
  Result<NodeFacts> facts = ReadFacts(ctx.transport);
  if (!facts.ok()) return facts.status();
  std::string err = CheckNodeIdentity(spec.name, Endpoint(spec), spec.hostname, *facts, recorded);
  if (!err.empty()) return Result<nlohmann::json>::Error(err);
  return IdentityRecord(*facts);
}

}  // namespace fleet
