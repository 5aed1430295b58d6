#include "src/engine/idle_round.h"

#include <httplib.h>

#include <algorithm>
#include <ctime>
#include <set>

#include "providers/gateway/gateway_provider.h"
#include "src/engine/node_connections.h"
#include "src/engine/node_take_down.h"
#include "state/state.h"

namespace fleet {

namespace {

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
    if (via == std::string::npos || r.no_gateway_key) continue;
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
    if (const auto held = in.held_up.find(c.node); held != in.held_up.end()) {
      kept(held->second);
      continue;
    }
    const TakeDownResult done = TakeNodeDown(m, in.store, c.node, [&](const std::string& line) {
      if (in.progress) in.progress("idle off " + c.node + ": " + line);
    });
    if (done.outcome == TakeDownOutcome::kKept) {
      kept(done.why);
      continue;
    }
    reported_.erase(c.node);
    e["outcome"] = done.outcome == TakeDownOutcome::kPoweredOff ? "powered_off" : "failed";
    e["detail"] = c.why + "; " + done.why;
    events.push_back(e);
    clock_.Forget(c.node);
  }
  for (const nlohmann::json& e : events)
    if (Status s = in.store->AppendEvent(e); !s.ok() && in.progress)
      in.progress("idle off: cannot record the event: " + s.message());
  return events;
}

}  // namespace fleet
