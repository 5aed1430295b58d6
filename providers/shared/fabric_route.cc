#include "providers/shared/fabric_route.h"

#include <cstdlib>
#include <sstream>

#include "providers/shared/fabric_facts.h"
#include "providers/shared/fabric_route_check_sh.h"
#include "providers/shared/node_script.h"
#include "src/shell_quote.h"

namespace fleet {

FabricEndpoint NodeFabricEndpoint(const Manifest& m, const std::map<std::string, NodeFacts>* facts,
                                  const std::string& node) {
  auto spec = m.nodes.find(node);
  if (spec == m.nodes.end()) return FabricEndpoint{};
  std::vector<FabricPort> ports;
  if (facts != nullptr) {
    auto f = facts->find(node);
    if (f != facts->end()) ports = FabricPortsFromJson(f->second.fabric);
  }
  return ResolveFabric(spec->second.fabric_address, spec->second.fabric_interface, ports);
}

std::string FabricRoute::Describe() const {
  const std::string arrow = from + " \u2192 " + to;
  if (direct) return arrow + " over fabric " + (subnet.empty() ? target_address : subnet);
  return arrow + " through the controller (" + why_not + ")";
}

CopyRoute FabricRoute::ForPlan(const std::string& what) const {
  CopyRoute c;
  c.what = what;
  c.from = from;
  c.to = to;
  c.direct = direct;
  if (direct) {
    c.fabric = subnet.empty() ? target_address : subnet;
    c.to_address = target_address;
  } else
    c.why_not = why_not_short.empty() ? why_not : why_not_short;
  return c;
}

nlohmann::json FabricRoute::ToJson() const {
  nlohmann::json j = {{"direct", direct}, {"from", from}, {"to", to}};
  if (direct) {
    j["source_address"] = source_address;
    j["target_address"] = target_address;
    j["subnet"] = subnet;
  } else {
    j["why_not"] = why_not;
    if (!why_not_short.empty()) j["why_not_short"] = why_not_short;
  }
  return j;
}

FabricRoute FabricRoute::FromJson(const nlohmann::json& j) {
  FabricRoute r;
  if (!j.is_object()) return r;
  r.direct = j.value("direct", false);
  r.from = j.value("from", "");
  r.to = j.value("to", "");
  r.source_address = j.value("source_address", "");
  r.target_address = j.value("target_address", "");
  r.subnet = j.value("subnet", "");
  r.why_not = j.value("why_not", "");
  r.why_not_short = j.value("why_not_short", "");
  if (r.direct && r.target_address.empty()) r.direct = false;
  return r;
}

FabricRoute PlanFabricRoute(const Manifest* m, const std::map<std::string, NodeFacts>* facts,
                            const std::string& from, const std::string& to,
                            const Settings& settings) {
  FabricRoute r;
  r.from = from;
  r.to = to;
  if (settings.fabric_off()) {
    r.why_not = r.why_not_short = "FLEET_FABRIC=off";
    return r;
  }
  if (m == nullptr) {
    r.why_not = r.why_not_short = "no manifest to read fabric addresses from";
    return r;
  }
  const FabricEndpoint s = NodeFabricEndpoint(*m, facts, from),
                       t = NodeFabricEndpoint(*m, facts, to);
  if (!s.usable() || !t.usable()) {
    const FabricEndpoint& missing = s.usable() ? t : s;
    r.why_not = (s.usable() ? to : from) + " has no fabric address: " +
                (missing.note.empty() ? "none declared or probed" : missing.note);
    r.why_not_short =
        s.usable() ? "no fabric address on the target" : from + " has no fabric address";
    return r;
  }
  if (!SameFabricSubnet(s, t)) {
    r.why_not =
        from + " (" + s.address + ") and " + to + " (" + t.address + ") share no fabric subnet";
    r.why_not_short = "no common fabric subnet";
    return r;
  }
  r.direct = true;
  r.source_address = s.address;
  r.target_address = t.address;
  r.subnet = !t.Subnet().empty() ? t.Subnet() : s.Subnet();
  return r;
}

// fabric_route_check.sh (beside this file) with its values.
std::string HasAddressScript(const std::string& address) {
  return ScriptWithValues({{"frc_what", "address"}, {"frc_addr", ShellQuote(address)}},
                          kFabricRouteCheckScript, kFabricRouteCheckScriptSize);
}

std::string HasRouteScript(const std::string& address) {
  return ScriptWithValues({{"frc_what", "route"}, {"frc_addr", ShellQuote(address)}},
                          kFabricRouteCheckScript, kFabricRouteCheckScriptSize);
}

Result<std::string> FabricAddressProblem(Transport* target, const std::string& node,
                                         const std::string& address) {
  Result<CommandResult> has = target->Run(HasAddressScript(address));
  if (!has.ok()) return has.status();
  if (has->exit_code != 0) return node + " no longer has " + address + " on any interface";
  return std::string();
}

Result<std::set<std::string>> UnroutedAddresses(Transport* source,
                                                const std::vector<std::string>& addresses) {
  std::string script;
  for (const std::string& a : addresses)
    script += "(" + HasRouteScript(a) + ") || echo " + ShellQuote(a) + "\n";
  Result<CommandResult> r = source->Run(script);
  if (!r.ok()) return r.status();
  std::set<std::string> unrouted;
  std::istringstream lines(r->out);
  for (std::string line; std::getline(lines, line);)
    if (!line.empty()) unrouted.insert(line);
  return unrouted;
}

Result<std::string> FabricRouteProblem(Transport* source, Transport* target,
                                       const FabricRoute& route) {
  Result<std::string> has = FabricAddressProblem(target, route.to, route.target_address);
  if (!has.ok() || !has->empty()) return has;
  Result<CommandResult> reach = source->Run(HasRouteScript(route.target_address));
  if (!reach.ok()) return reach.status();
  if (reach->exit_code != 0) return route.from + " has no route to " + route.target_address;
  return std::string();
}

}  // namespace fleet
