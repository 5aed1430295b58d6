#include "src/engine/serve_checks.h"

#include <algorithm>
#include <cstdio>
#include <future>
#include <mutex>

#include "src/engine/gateway_checks.h"

namespace fleet {
namespace {

struct Chosen {
  std::string deployment;
  std::string node;  // "" for every node
};

// "deployment.NAME@NODE", "NAME@NODE", "deployment.NAME", "NAME".
Chosen ParseAddress(const std::string& address) {
  std::string a = address;
  if (a.rfind("deployment.", 0) == 0) a = a.substr(std::string("deployment.").size());
  const size_t at = a.find('@');
  if (at == std::string::npos) return {a, ""};
  return {a.substr(0, at), a.substr(at + 1)};
}

bool Wanted(const std::vector<Chosen>& chosen, const std::string& deployment,
            const std::string& node) {
  if (chosen.empty()) return true;
  for (const Chosen& c : chosen)
    if (c.deployment == deployment && (c.node.empty() || c.node == node)) return true;
  return false;
}

// Every serve of the manifest that answers the API, rendered.
std::vector<ContainerSpec> ApiServes(const Manifest& m) {
  std::vector<ContainerSpec> out;
  for (const auto& [name, d] : m.deployments)
    for (const std::string& node : d.nodes) {
      Result<ContainerSpec> spec = RenderContainerSpec(m, name, node);
      if (spec.ok() && !spec->HealthUrl().empty()) out.push_back(*spec);
    }
  return out;
}

SmokeResult Unreachable(const ContainerSpec& s, const std::string& why) {
  SmokeResult r;
  r.deployment = s.deployment;
  r.node = s.node;
  r.check = "identity";
  r.result = "error";
  r.detail = "node " + s.node + " cannot be reached over SSH: " + why;
  return r;
}

std::string Seconds(double s) {
  if (s < 0) return "-";
  char buf[32];
  if (s < 1)
    std::snprintf(buf, sizeof buf, "%.0f ms", s * 1000);
  else
    std::snprintf(buf, sizeof buf, s < 10 ? "%.2f s" : "%.0f s", s);
  return buf;
}

// "deployment.NAME@NODE"; a row of a gateway (gateway_checks.h) as it is.
std::string Subject(const SmokeResult& r) {
  if (r.deployment.find(' ') != std::string::npos) return r.deployment + " (" + r.node + ")";
  return "deployment." + r.deployment + "@" + r.node;
}

}  // namespace

Status ValidateCheckAddresses(const Manifest& m, const std::vector<std::string>& addresses) {
  std::vector<std::string> names;
  for (const auto& [name, _] : m.deployments) names.push_back(name);
  for (const std::string& a : addresses) {
    const Chosen c = ParseAddress(a);
    auto d = m.deployments.find(c.deployment);
    if (d == m.deployments.end()) {
      const std::string near = NearestName(c.deployment, names);
      return Status::Error("no deployment '" + c.deployment + "' in the manifests" +
                           (near.empty() ? "" : "; did you mean '" + near + "'?"));
    }
    if (!c.node.empty() &&
        std::find(d->second.nodes.begin(), d->second.nodes.end(), c.node) == d->second.nodes.end())
      return Status::Error("deployment '" + c.deployment + "' does not run on '" + c.node + "'");
  }
  return Status::OK();
}

std::vector<SmokeResult> RunServeChecks(const Manifest& m, NodeConnections* connections,
                                        const std::vector<std::string>& addresses, Clock* clock) {
  std::vector<Chosen> chosen;
  for (const std::string& a : addresses) chosen.push_back(ParseAddress(a));
  const std::vector<ContainerSpec> serves = ApiServes(m);
  std::vector<const ContainerSpec*> wanted;
  for (const ContainerSpec& s : serves)
    if (Wanted(chosen, s.deployment, s.node)) wanted.push_back(&s);

  // The wanted serves' nodes, connected in parallel; others (for the
  // locator) on first use.
  std::mutex mu;
  std::map<std::string, std::shared_future<Status>> connected;  // by node
  auto connect_async = [&](const std::string& node) {
    std::lock_guard<std::mutex> l(mu);
    auto it = connected.find(node);
    if (it == connected.end())
      it = connected
               .emplace(node, std::async(
                                  std::launch::async,
                                  [connections, node] { return connections->Get(node)->Connect(); })
                                  .share())
               .first;
    return it->second;
  };
  for (const ContainerSpec* s : wanted) connect_async(s->node);
  auto connect = [&](const std::string& node) -> Transport* {
    return connect_async(node).get().ok() ? connections->Get(node) : nullptr;
  };

  // Each serve checked in its own thread (a 10-minute needle on one does
  // not hold up the others); a node's session serialises its commands.
  std::vector<std::future<std::vector<SmokeResult>>> running;
  for (const ContainerSpec* s : wanted)
    running.push_back(std::async(std::launch::async, [&, s]() -> std::vector<SmokeResult> {
      Transport* t = connect(s->node);
      if (t == nullptr) {
        SmokeResult r = Unreachable(*s, connect_async(s->node).get().message());
        // A node that follows demand is asleep, not broken: its checks are
        // skipped, and say so (they never wake it).
        if (const NodePower& p = m.nodes.at(s->node).power; p.present && p.state == "on_demand") {
          r.result = "unchecked";
          r.detail = "node " + s->node + " is asleep (power: on_demand): not checked, not woken";
        }
        return {r};
      }
      // Who else holds the connection: each other serve, asked on its node.
      ConnectionLocator locate = [&](int client_port) -> std::string {
        for (const ContainerSpec& other : serves) {
          if (other.deployment == s->deployment && other.node == s->node) continue;
          Transport* o = connect(other.node);
          if (o == nullptr) continue;
          Result<CommandResult> r =
              o->Run(ConnectionOwnerScript(other.cli, other.container, other.port, client_port));
          if (r.ok() && r->out.find("owner=container") != std::string::npos)
            return "deployment." + other.deployment + "@" + other.node + " (port " +
                   std::to_string(other.port) + ")";
        }
        return "";
      };
      return RunSmoke(TargetFor(m, *s), m.deployments.at(s->deployment).smoke, t, locate, clock);
    }));
  std::vector<SmokeResult> out;
  for (auto& f : running)
    for (SmokeResult& r : f.get()) out.push_back(std::move(r));
  // The whole fleet's checks also ask every model through each gateway.
  if (addresses.empty())
    for (SmokeResult& r : RunGatewayChecks(m, clock)) out.push_back(std::move(r));
  return out;
}

std::string RenderCheckTable(const std::vector<SmokeResult>& results) {
  std::string out;
  char line[512];
  std::snprintf(line, sizeof line, "%-20s %-10s %-12s %-7s %-9s %s\n", "DEPLOYMENT", "NODE",
                "CHECK", "RESULT", "LATENCY", "T/S");
  out += line;
  for (const SmokeResult& r : results) {
    char tps[32] = "-";
    if (r.tps >= 0) std::snprintf(tps, sizeof tps, "%.1f", r.tps);
    std::snprintf(line, sizeof line, "%-20s %-10s %-12s %-7s %-9s %s\n", r.deployment.c_str(),
                  r.node.c_str(), r.check.c_str(), r.result.c_str(), Seconds(r.wall_s).c_str(),
                  tps);
    out += line;
  }
  int bad = 0, cut = 0;
  for (const SmokeResult& r : results) {
    if (r.passed()) continue;
    ++bad;
    cut += r.result == "cut";
    out += "\n" +
           std::string(r.result == "fail"        ? "FAIL"
                       : r.result == "cut"       ? "CUT"
                       : r.result == "unchecked" ? "UNCHECKED"
                                                 : "ERROR") +
           " " + Subject(r) + " check " + r.check + " (" + r.time + "): " + r.detail + "\n";
    if (!r.prompt.empty()) out += "  prompt: " + r.prompt + "\n";
    if (!r.reply.empty()) out += "  reply:  " + r.reply + "\n";
  }
  out += "\n" + std::to_string(results.size() - bad) + " of " + std::to_string(results.size()) +
         " passed" +
         (cut > 0 ? ", " + std::to_string(cut) + " cut by max_tokens (not failed)" : "") + "\n";
  return out;
}

}  // namespace fleet
