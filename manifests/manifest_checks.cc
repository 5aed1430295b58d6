#include "manifests/manifest_checks.h"

#include <algorithm>
#include <utility>

namespace fleet::manifest_checks {

namespace {

std::string SectionOf(const std::string& kind) { return kind == "store" ? "stores" : kind + "s"; }

}  // namespace

void CheckReferences(const Manifest& m, const ReadNotes& notes, Reporter* reporter) {
  for (const PendingRef& r : notes.refs) {
    std::vector<std::string> names;
    auto collect = [&names](const auto& map) {
      for (const auto& [name, unused] : map) names.push_back(name);
    };
    if (r.kind == "node") collect(m.nodes);
    if (r.kind == "image") collect(m.images);
    if (r.kind == "model") collect(m.models);
    if (r.kind == "store") collect(m.stores);
    if (std::find(names.begin(), names.end(), r.ref.value) != names.end()) continue;
    std::string message = r.context + ": " + r.kind + " '" + r.ref.value +
                          "' is not defined under " + SectionOf(r.kind) + ":";
    const std::string near = NearestName(r.ref.value, names);
    if (!near.empty()) {
      message += "; did you mean '" + near + "'?";
    } else if (names.empty()) {
      message += " (there are none)";
    } else if (names.size() <= 12) {
      std::string list;
      for (const std::string& n : names) list += (list.empty() ? "" : ", ") + n;
      message += " (defined: " + list + ")";
    }
    reporter->Error(r.ref.loc, message);
  }
}

void CheckSwitches(const Manifest& /*m*/, const ReadNotes& notes, Reporter* reporter) {
  std::map<std::string, std::string> first_user;  // entity -> node
  for (const std::string& node : notes.node_order) {
    auto it = notes.switches.find(node);
    if (it == notes.switches.end()) continue;
    const Located<std::string>& entity = it->second;
    auto [first, inserted] = first_user.emplace(entity.value, node);
    if (inserted) continue;
    const Located<std::string>& other = notes.switches.at(first->second);
    reporter->Error(entity.loc, entity.value + " is used by nodes " + first->second + " (" +
                                    other.loc.ToString() + ") and " + node + " (" +
                                    entity.loc.ToString() + "); each node needs its own switch");
  }
}

void CheckAddresses(const Manifest& m, const ReadNotes& notes, Reporter* reporter) {
  // Two names for one machine is the log's label-inversion trap: every
  // action on one name lands on the other node too.
  std::map<std::string, std::string> first_node;  // address:port -> node
  for (const std::string& name : notes.node_order) {
    const NodeSpec& node = m.nodes.at(name);
    if (node.address.empty()) continue;
    const std::string key = node.address + ":" + std::to_string(node.ssh.port);
    auto [first, inserted] = first_node.emplace(key, name);
    if (inserted) continue;
    reporter->Error(node.loc, "nodes " + first->second + " (" +
                                  m.nodes.at(first->second).loc.ToString() + ") and " + name +
                                  " both point at " + key + "; each node must be its own machine");
  }
}

void CheckPorts(const Manifest& m, const ReadNotes& notes, Reporter* reporter) {
  struct Use {
    std::string deployment;
    SourceLoc loc;
  };
  std::map<std::pair<std::string, int>, Use> used;
  for (const std::string& name : notes.deployment_order) {
    const DeploymentSpec& d = m.deployments.at(name);
    const DeploymentLocs& locs = notes.deployment_locs.at(name);
    std::vector<std::string> seen;
    for (const auto& node : locs.nodes) {
      if (std::find(seen.begin(), seen.end(), node.value) != seen.end()) {
        reporter->Error(node.loc,
                        "deployment '" + name + "' lists node '" + node.value + "' twice");
        continue;
      }
      seen.push_back(node.value);
      if (d.port == 0) continue;
      auto [it, inserted] = used.emplace(std::make_pair(node.value, d.port), Use{name, locs.port});
      if (inserted) continue;
      reporter->Error(locs.port, "deployments '" + it->second.deployment + "' (" +
                                     it->second.loc.ToString() + ") and '" + name + "' (" +
                                     locs.port.ToString() + ") both use port " +
                                     std::to_string(d.port) + " on node '" + node.value +
                                     "'; give each its own port");
    }
  }
}

void CheckOneServePerNode(const Manifest& m, const ReadNotes& notes, Reporter* reporter) {
  struct First {
    std::string deployment;
    SourceLoc loc;
  };
  std::map<std::string, First> on_node;  // node -> the first deployment declared on it
  for (const std::string& name : notes.deployment_order) {
    const DeploymentSpec& d = m.deployments.at(name);
    for (const auto& node : notes.deployment_locs.at(name).nodes) {
      auto [it, inserted] = on_node.emplace(node.value, First{name, node.loc});
      if (inserted || it->second.deployment == name) continue;
      const DeploymentSpec& other = m.deployments.at(it->second.deployment);
      if (d.shared && other.shared) continue;
      reporter->Error(node.loc, "deployments '" + it->second.deployment + "' (" +
                                    it->second.loc.ToString() + ") and '" + name +
                                    "' both run on node '" + node.value +
                                    "'; a node serves one deployment at a time: move one, "
                                    "or set shared: true on both to run them together");
    }
  }
}

void CheckModelPlacement(const Manifest& m, const ReadNotes& notes, Reporter* reporter) {
  // A model in a shared store is visible only on the nodes that mount it.
  for (const std::string& name : notes.deployment_order) {
    const DeploymentSpec& d = m.deployments.at(name);
    auto model = m.models.find(d.model);
    if (model == m.models.end() || model->second.store == "local") continue;
    auto store = m.stores.find(model->second.store);
    if (store == m.stores.end()) continue;
    for (const auto& node : notes.deployment_locs.at(name).nodes) {
      const auto& mounted = store->second.nodes;
      if (std::find(mounted.begin(), mounted.end(), node.value) != mounted.end()) continue;
      if (m.nodes.count(node.value) == 0) continue;  // already reported
      reporter->Error(node.loc, "deployment '" + name + "' runs on node '" + node.value +
                                    "', but its model '" + d.model + "' lives in store '" +
                                    store->first + "', which node '" + node.value +
                                    "' does not mount; add the node to the store's nodes or use "
                                    "store: local");
    }
  }
}

void CheckPoweredOff(const Manifest& m, const ReadNotes& notes, Reporter* reporter) {
  for (const std::string& name : notes.deployment_order) {
    for (const auto& node : notes.deployment_locs.at(name).nodes) {
      auto it = m.nodes.find(node.value);
      if (it == m.nodes.end()) continue;
      const NodePower& power = it->second.power;
      if (!power.present || power.state != "off") continue;
      reporter->Error(node.loc, "deployment '" + name + "' runs on node '" + node.value +
                                    "', whose power state is off (" + power.loc.ToString() +
                                    "); set its state: on or move the deployment");
    }
  }
}

namespace {

// A schedule takes its deployment's nodes down outside its windows and up
// at their start: only a node whose power follows demand may be (a node
// declared on stays on; one declared off runs nothing).
void CheckSchedules(const Manifest& m, const ReadNotes& notes, Reporter* reporter) {
  for (const std::string& name : notes.deployment_order) {
    const auto d = m.deployments.find(name);
    if (d == m.deployments.end() || !d->second.schedule.present) continue;
    for (const auto& node : notes.deployment_locs.at(name).nodes) {
      auto it = m.nodes.find(node.value);
      if (it == m.nodes.end()) continue;
      const NodePower& power = it->second.power;
      if (power.present && power.state == "on_demand") continue;
      reporter->Error(d->second.schedule.loc,
                      "deployment '" + name + "' has a schedule, but its node '" + node.value +
                          "' does not follow demand; give it power: {switch: ..., state: "
                          "on_demand} (a schedule powers its nodes on and off)");
    }
  }
}

// A node's own schedule powers it on and off: its power must follow demand.
void CheckNodeSchedules(const Manifest& m, const ReadNotes& notes, Reporter* reporter) {
  for (const std::string& name : notes.node_order) {
    const auto n = m.nodes.find(name);
    if (n == m.nodes.end() || !n->second.schedule.present) continue;
    const NodePower& power = n->second.power;
    if (power.present && power.state == "on_demand") continue;
    reporter->Error(n->second.schedule.loc,
                    "node '" + name +
                        "' has a schedule, but its power does not follow demand; give it "
                        "power: {switch: ..., state: on_demand} (a schedule powers it on and off)");
  }
}

// A gateway is the way a request wakes a node: it must not sleep itself.
void CheckGatewayNodesStayOn(const Manifest& m, Reporter* reporter) {
  for (const auto& [name, g] : m.gateways)
    for (const std::string& node : g.nodes) {
      auto it = m.nodes.find(node);
      if (it == m.nodes.end() || !it->second.power.present || it->second.power.state != "on_demand")
        continue;
      reporter->Error(it->second.power.loc,
                      "node '" + node + "' runs gateway '" + name +
                          "', which wakes the other nodes: it cannot be on_demand itself; "
                          "set its state: on");
    }
}

}  // namespace

void CheckAcrossSections(const Manifest& m, const ReadNotes& notes, Reporter* reporter) {
  CheckReferences(m, notes, reporter);
  CheckSwitches(m, notes, reporter);
  CheckAddresses(m, notes, reporter);
  CheckPorts(m, notes, reporter);
  CheckOneServePerNode(m, notes, reporter);
  CheckModelPlacement(m, notes, reporter);
  CheckPoweredOff(m, notes, reporter);
  CheckSchedules(m, notes, reporter);
  CheckNodeSchedules(m, notes, reporter);
  CheckGatewayNodesStayOn(m, reporter);
}

}  // namespace fleet::manifest_checks
