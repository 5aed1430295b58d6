#include "src/engine/gateway_checks.h"

#include <algorithm>
#include <future>
#include <map>

#include "providers/gateway/gateway_provider.h"
#include "src/openai_client.h"

namespace fleet {
namespace {

std::string BaseUrl(const Manifest& m, const std::string& node, int port) {
  return "http://" + ClientAddress(m.nodes.at(node)) + ":" + std::to_string(port);
}

// The gateway answers, and lists every routed model. With keys, each
// model is looked for in the list of a key that may use it (a key sees only
// its models); a model no key may use is not looked for (AskThrough says so).
SmokeResult GatewayAnswers(const GatewaySpec& g, const std::string& node,
                           const std::string& base_url, const std::vector<GatewayRoute>& routes,
                           const std::vector<GatewayKey>& keys) {
  SmokeResult r;
  r.deployment = "gateway " + g.name;
  r.node = node;
  r.check = "gateway";
  r.result = "pass";
  const bool keyed = !g.keys_path.empty() || !g.keys_env.empty();
  std::map<std::string, std::vector<std::string>> listed;  // by key
  for (const GatewayRoute& route : routes) {
    const std::string key = keyed ? KeyFor(keys, route.model) : "";
    if (keyed && key.empty()) continue;
    if (!listed.count(key)) {
      BearerScope bearer(key);
      Result<std::vector<std::string>> list = ListServedModels(base_url, 10);
      if (!list.ok()) {
        r.result = list.status().own_fault() ? "unchecked" : "error";
        r.detail = "gateway " + g.name + " on " + node + " does not answer at " + base_url + ": " +
                   list.status().message();
        return r;
      }
      listed[key] = *list;
    }
    const std::vector<std::string>& names = listed[key];
    if (std::find(names.begin(), names.end(), route.model) == names.end()) {
      r.result = "fail";
      r.detail = "gateway " + g.name + " on " + node + " does not list " + route.model +
                 " (its config is not the one declared: fleet plan says why)";
    }
  }
  return r;
}

// The smoke list of the deployment behind `route`, asked through the
// gateway; each row names the serve that answered.
std::vector<SmokeResult> AskThrough(const Manifest& m, const GatewaySpec& g,
                                    const std::string& base_url, const GatewayRoute& route,
                                    const std::vector<GatewayRoute>& routes,
                                    const std::vector<GatewayKey>& keys, Clock* clock) {
  std::vector<SmokeResult> out;
  // fleet's checks are the gateway's clients like any other: with keys,
  // they send a key of the gateway's keys that may use the model (read from
  // the operator's keys file or variable, kept in this process).
  const bool keyed = !g.keys_path.empty() || !g.keys_env.empty();
  const std::string key = keyed ? KeyFor(keys, route.model) : "";
  for (const SmokeCheck& c : m.deployments.at(route.deployment).smoke) {
    if (keyed && key.empty()) {
      SmokeResult r;
      r.deployment = route.deployment + " via " + g.name;
      r.node = "?";
      r.check = c.name;
      r.result = "unchecked";
      r.no_gateway_key = true;
      r.detail = "no key of gateway " + g.name + " may use " + route.model +
                 ": not checked through the gateway";
      out.push_back(std::move(r));
      continue;
    }
    BearerScope bearer(key);
    SmokeResult r = RunOneCheck(base_url, route.model, c, clock);
    r.deployment = route.deployment + " via " + g.name;
    r.node = "?";
    auto by = std::find_if(routes.begin(), routes.end(), [&](const GatewayRoute& x) {
      return x.deployment + "_" + x.node == r.served_by;
    });
    if (by != routes.end()) r.node = by->node;
    if (r.served_by == kGatewayWakeServer) {
      // The gateway handed it to the wake listener, which refuses fleet's
      // own requests: the model sleeps, and a check does not wake it.
      r.result = "unchecked";
      r.detail = route.model + " is asleep: gateway " + g.name +
                 " handed the check to the wake listener, which does not wake a node for "
                 "fleet's own checks";
      out.push_back(std::move(r));
      continue;
    }
    if (r.result != "error" && r.result != "unchecked" &&
        (by == routes.end() || by->model != route.model)) {
      r.result = "fail";
      r.detail = "gateway " + g.name + " sent " + route.model + " to " +
                 (r.served_by.empty() ? std::string("a server it did not name") : r.served_by) +
                 ", not to a serve of it";
    }
    out.push_back(std::move(r));
  }
  return out;
}

std::vector<SmokeResult> CheckOneGateway(const Manifest& m, const GatewaySpec& g,
                                         const std::string& node,
                                         const std::vector<GatewayRoute>& routes, Clock* clock) {
  const std::string base_url = BaseUrl(m, node, g.port);
  Result<std::vector<GatewayKey>> keys = LoadGatewayKeys(g);
  if (!keys.ok()) {
    SmokeResult r;
    r.deployment = "gateway " + g.name;
    r.node = node;
    r.check = "gateway";
    r.result = "error";
    r.detail = "gateway " + g.name + ": " + keys.status().message();
    return {r};
  }
  std::vector<SmokeResult> out = {GatewayAnswers(g, node, base_url, routes, *keys)};
  if (out.front().result == "error" || out.front().result == "unchecked") return out;
  std::vector<std::string> asked;  // each model once, through its first route
  for (const GatewayRoute& route : routes) {
    if (std::find(asked.begin(), asked.end(), route.model) != asked.end()) continue;
    asked.push_back(route.model);
    for (SmokeResult& r : AskThrough(m, g, base_url, route, routes, *keys, clock))
      out.push_back(std::move(r));
  }
  return out;
}

}  // namespace

std::vector<SmokeResult> RunGatewayChecks(const Manifest& m, Clock* clock) {
  std::vector<std::string> unnamed;
  const std::vector<GatewayRoute> routes = GatewayRoutes(m, &unnamed);
  std::vector<std::future<std::vector<SmokeResult>>> running;
  for (const auto& [name, g] : m.gateways)
    for (const std::string& node : g.nodes)
      if (m.nodes.count(node))
        running.push_back(std::async(std::launch::async, [&m, &g, node, &routes, clock] {
          return CheckOneGateway(m, g, node, routes, clock);
        }));
  std::vector<SmokeResult> out;
  for (auto& f : running)
    for (SmokeResult& r : f.get()) out.push_back(std::move(r));
  return out;
}

}  // namespace fleet
