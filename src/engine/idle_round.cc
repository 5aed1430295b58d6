#include "src/engine/idle_round.h"

#include <httplib.h>

#include <algorithm>
#include <ctime>
#include <set>

#include "providers/gateway/gateway_provider.h"
#include "src/engine/executor.h"
#include "src/engine/node_connections.h"
#include "src/power_switch.h"
#include "state/state.h"

namespace fleet {

namespace {

std::string IdleJoined(const std::vector<std::string>& v) {
  std::string s;
  for (const std::string& x : v) s += (s.empty() ? "" : "; ") + x;
  return s;
}

// Model -> requests HAProxy counted for it, summed over every gateway node
// that answered; a model of a gateway that did not answer is left out (its
// nodes then count as busy).
std::map<std::string, uint64_t> ModelTotals(const Manifest& m) {
  std::vector<std::string> unnamed;
  GatewayWant routed;
  routed.routes = GatewayRoutes(m, &unnamed);
  const std::map<std::string, std::string> backends = GatewayBackendNames(routed);
  std::map<std::string, uint64_t> totals;
  std::set<std::string> unread;
  for (const auto& [name, g] : m.gateways)
    for (const std::string& node : g.nodes) {
      auto n = m.nodes.find(node);
      if (n == m.nodes.end()) continue;
      httplib::Client client(ClientAddress(n->second), g.port);
      client.set_connection_timeout(5, 0);
      client.set_read_timeout(5, 0);
      httplib::Result r = client.Get("/metrics");
      if (!r || r->status != 200) {
        for (const auto& [model, unused] : backends) unread.insert(model);
        continue;
      }
      const std::map<std::string, uint64_t> read = BackendRequestTotals(r->body);
      for (const auto& [model, backend] : backends)
        if (auto it = read.find(backend); it != read.end()) totals[model] += it->second;
    }
  for (const std::string& model : unread) totals.erase(model);
  return totals;
}

// The requests fleet's own checks sent through the gateways this round,
// by model: each check one request, a fresh_context check two.
std::map<std::string, int> OwnRequests(const Manifest& m, const std::vector<SmokeResult>& checks) {
  std::vector<std::string> unnamed;
  const std::vector<GatewayRoute> routes = GatewayRoutes(m, &unnamed);
  std::map<std::string, int> own;
  for (const SmokeResult& r : checks) {
    const size_t via = r.deployment.find(" via ");
    if (via == std::string::npos || r.detail.rfind("no key of gateway", 0) == 0) continue;
    const std::string deployment = r.deployment.substr(0, via);
    const auto d = m.deployments.find(deployment);
    if (d == m.deployments.end()) continue;
    int requests = 1;
    for (const SmokeCheck& c : d->second.smoke)
      if (c.name == r.check && c.fresh_context_tokens > 0) requests = 2;
    for (const GatewayRoute& route : routes)
      if (route.deployment == deployment) {
        own[route.model] += requests;
        break;
      }
  }
  return own;
}

// Destroy's plan for `node` alone: its serves, display RAM and power; the
// gateways routing to it keep running (the serve's health check drops it,
// and the wake backup takes its requests).
Plan TakeDownPlan(const Manifest& m, const std::string& node, const State& state,
                  std::vector<std::unique_ptr<Provider>>* providers, NodeConnections* connections,
                  PowerSwitch* power) {
  PlanOptions po;
  po.destroy = true;
  po.targets = {"node." + node};
  Plan plan = Planner(&m, providers, connections, power).MakePlan(state, po);
  std::set<std::string> kept;
  std::erase_if(plan.changes, [&](const PlanChange& c) { return c.node != node; });
  for (const PlanChange& c : plan.changes) kept.insert(c.address);
  for (PlanChange& c : plan.changes)
    std::erase_if(c.depends_on, [&](const std::string& d) { return !kept.count(d); });
  return plan;
}

}  // namespace

std::vector<nlohmann::json> IdleOff::Round(const IdleRoundInput& in) {
  const Manifest& m = *in.manifest;
  std::set<std::string> awake;
  bool any = false;
  for (const auto& [name, spec] : m.nodes) {
    if (!spec.power.present || spec.power.state != "on_demand") continue;
    any = any || spec.power.idle_off_s > 0;
    auto f = in.probed->facts.find(name);
    if (f != in.probed->facts.end() && f->second.reachable) awake.insert(name);
  }
  std::vector<nlohmann::json> events;
  if (!any) return events;
  clock_.Observe(m, ModelTotals(m), OwnRequests(m, *in.checks), awake, in.now_s);
  const std::vector<IdleCandidate> candidates = IdleCandidates(m, clock_, awake, in.now_s);
  // A node no longer idle (a request came): its next "kept" is news again.
  std::erase_if(reported_, [&](const auto& r) {
    return std::none_of(candidates.begin(), candidates.end(),
                        [&](const IdleCandidate& c) { return c.node == r.first; });
  });
  for (const IdleCandidate& c : candidates) {
    nlohmann::json e = {{"event", "idle_off"},
                        {"time", NowRfc3339()},
                        {"address", "node." + c.node},
                        {"node", c.node}};
    auto kept = [&](const std::string& why) {
      if (reported_[c.node] == why) return;  // said already
      reported_[c.node] = why;
      e["outcome"] = "kept";
      e["detail"] = c.why + "; kept on: " + why;
      events.push_back(e);
    };
    Result<std::unique_ptr<StateLock>> lock = LockWithTimeout(in.store, "idle off", 0);
    if (!lock.ok()) {
      kept("an apply, heal or wake holds the state (" + lock.status().message() + ")");
      continue;
    }
    NodeConnections connections(&m);
    Result<CommandResult> found = connections.Get(c.node)->Run(IdleBlockersScript());
    if (!found.ok()) {
      kept("cannot ask it who uses it: " + found.status().message());
      continue;
    }
    if (const std::string why = IdleBlocker(found->out); !why.empty()) {
      kept(why);
      continue;
    }
    Result<State> state = in.store->Load();
    if (!state.ok()) {
      kept("the state: " + state.status().message());
      continue;
    }
    std::vector<std::unique_ptr<Provider>> providers = MakeProviders();
    std::unique_ptr<PowerSwitch> power = MakeDeclaredPowerSwitch(m.power);
    const Plan plan = TakeDownPlan(m, c.node, *state, &providers, &connections, power.get());
    reported_.erase(c.node);
    if (!plan.errors.empty()) {
      e["outcome"] = "failed";
      e["detail"] = c.why + "; its take-down plan: " + IdleJoined(plan.errors);
      events.push_back(e);
      continue;
    }
    Executor executor(&m, &providers, &connections, in.store, power.get(),
                      [&](const std::string& line) {
                        if (in.progress) in.progress("idle off " + c.node + ": " + line);
                      });
    const ApplyReport report = executor.Apply(plan, &state.value(), ApplyOptions{});
    e["outcome"] = report.ok() ? "powered_off" : "failed";
    e["detail"] = c.why + (report.ok() ? "; taken down as destroy would (" +
                                             std::to_string(report.done.size()) + " steps)"
                                       : "; " + IdleJoined(report.failed));
    events.push_back(e);
    clock_.Forget(c.node);
  }
  for (const nlohmann::json& e : events)
    if (Status s = in.store->AppendEvent(e); !s.ok() && in.progress)
      in.progress("idle off: cannot record the event: " + s.message());
  return events;
}

}  // namespace fleet
