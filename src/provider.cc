#include "src/provider.h"

#include <sstream>

#include "state/state.h"

namespace fleet {

PlanChange Provider::DiffDestroy(const DesiredResource& desired, const ActualResource& actual,
                                 const ResourceRecord* /*record*/,
                                 const DiffContext& /*ctx*/) const {
  PlanChange c;
  c.address = desired.address;
  c.type = desired.type;
  c.node = desired.node;
  c.action = Action::kNoop;
  c.summary = "kept (destroy leaves " + desired.type + " resources in place)";
  c.before = actual.exists ? actual.attributes : nlohmann::json();
  c.after = c.before;
  return c;
}

bool Provider::IsNodeItself() const { return false; }

DeclaredPower Provider::PowerOf(const DesiredResource&) const { return DeclaredPower::kOn; }

std::string Provider::UnplannedCost(const DesiredResource&) const { return ""; }

std::string Provider::TakesDown(const PlanChange&) const { return ""; }

Role Provider::role() const { return Role::kOther; }

PlanChange Provider::DiffOrphan(const ResourceRecord& record, const DiffContext&) const {
  return ForgetRecord(record);
}

std::vector<PlanChange> Provider::DiffUnrecorded(const std::string&, const DiffContext&) const {
  return {};
}

std::string Provider::InventoryScript(const std::string&, const Manifest&) const { return ""; }

std::string ProbeInSubshell(const std::string& script) { return "(\n" + script + "\n)"; }

Result<nlohmann::json> Provider::Adopt(const DesiredResource& desired, const ActualResource&,
                                       const DiffContext&, const StepContext*) const {
  return Result<nlohmann::json>::Error("fleet state adopt does not take over a " + desired.type +
                                       " (apply records it when it finds it in place)");
}

PlanChange ForgetRecord(const ResourceRecord& record) {
  PlanChange c;
  c.address = record.address;
  c.type = record.type;
  c.node = record.node;
  c.action = Action::kDelete;
  c.summary = "forget (no longer declared in the manifests; nothing on the node changes)";
  c.reasons.push_back("in state, not in the manifests");
  c.before = record.attributes;
  c.detail = {{"forget", true}};
  return c;
}

Status Provider::Undo(const PlanChange& change, const nlohmann::json& /*applied*/,
                      const StepContext& /*ctx*/, bool* undone) const {
  (void)change;
  *undone = false;
  return Status::OK();
}

PlanChange ChangeFor(const DesiredResource& d) {
  PlanChange c;
  c.address = d.address;
  c.type = d.type;
  c.node = d.node;
  return c;
}

std::map<std::string, std::string> ParseKeyValues(const std::string& text) {
  std::map<std::string, std::string> kv;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    size_t eq = line.find('=');
    if (eq != std::string::npos) kv[line.substr(0, eq)] = line.substr(eq + 1);
  }
  return kv;
}

Result<CommandResult> RunOnNode(const StepContext& ctx, const std::string& command) {
  Result<CommandResult> r = ctx.transport->Run(command);
  if (!r.ok()) return r;
  if (r->exit_code != 0)
    return Result<CommandResult>::Error("on " + ctx.node->name + ": `" + command + "` exited " +
                                        std::to_string(r->exit_code) + ": " + r->err);
  return r;
}

std::string ClientAddress(const NodeSpec& spec) {
  return spec.address == "local" ? "127.0.0.1" : spec.address;
}

SshEndpoint EndpointFor(const NodeSpec& spec) {
  SshEndpoint e;
  e.node = spec.name;
  e.address = spec.address;
  e.port = spec.ssh.port;
  e.user = spec.ssh.user;
  e.identity = spec.ssh.identity;
  e.known_hosts = spec.ssh.known_hosts;
  e.connect_timeout_s = spec.ssh.connect_timeout_s;
  return e;
}

Result<std::unique_ptr<Transport>> ConnectNode(const Manifest& m, const std::string& node) {
  auto it = m.nodes.find(node);
  if (it == m.nodes.end())
    return Result<std::unique_ptr<Transport>>::Error("no node " + node + " in the manifests");
  std::unique_ptr<Transport> t = MakeTransport(EndpointFor(it->second));
  Status s = t->Connect();
  if (!s.ok()) return s.Prefixed(node);
  return t;
}

}  // namespace fleet
