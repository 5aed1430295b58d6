#include "src/engine/wake_policy.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "providers/gateway/gateway_provider.h"

namespace fleet {

namespace {

// The longest wake.hold of the gateways with wake; 0: none has one.
int LongestHold(const Manifest& m) {
  int hold = 0;
  for (const auto& [name, g] : m.gateways)
    if (g.wake.present) hold = std::max(hold, g.wake.hold_s);
  return hold;
}

WakeTarget TargetOf(const Manifest& m, const std::string& model, const std::string& deployment,
                    const DeploymentSpec& d) {
  WakeTarget t;
  t.model = model;
  t.deployment = deployment;
  t.nodes = d.nodes;
  t.backoff_s = d.restart.backoff_s;
  t.max_backoff_s = d.restart.max_backoff_s;
  if (const int hold = LongestHold(m); hold > 0) t.hold_s = hold;
  return t;
}

}  // namespace

std::optional<WakeTarget> WakeTargetFor(const Manifest& m, const std::string& model) {
  if (model.empty()) return std::nullopt;
  std::vector<std::string> unnamed;
  for (const GatewayRoute& r : GatewayRoutes(m, &unnamed)) {
    if (r.model != model || !r.wakes) continue;
    const auto d = m.deployments.find(r.deployment);
    if (d == m.deployments.end()) continue;
    WakeTarget t = TargetOf(m, model, r.deployment, d->second);
    t.head_host = r.host;
    t.head_port = r.port;
    return t;
  }
  return std::nullopt;
}

std::optional<WakeTarget> WakeTargetForDeployment(const Manifest& m,
                                                  const std::string& deployment) {
  const auto d = m.deployments.find(deployment);
  if (d == m.deployments.end() || d->second.nodes.empty()) return std::nullopt;
  std::string model = d->second.served_model.empty() ? deployment : d->second.served_model;
  std::vector<std::string> unnamed;
  for (const GatewayRoute& r : GatewayRoutes(m, &unnamed))
    if (r.deployment == deployment) {
      WakeTarget t = TargetOf(m, r.model, deployment, d->second);
      t.head_host = r.host;
      t.head_port = r.port;
      return t;
    }
  return TargetOf(m, model, deployment, d->second);
}

std::optional<WakeTarget> WakeTargetForNode(const Manifest& m, const std::string& node) {
  const auto n = m.nodes.find(node);
  if (n == m.nodes.end() || !n->second.power.present || n->second.power.state != "on_demand")
    return std::nullopt;
  WakeTarget t;
  t.nodes = {node};
  const RestartPolicy builtin;
  t.backoff_s = builtin.backoff_s;
  t.max_backoff_s = builtin.max_backoff_s;
  if (const int hold = LongestHold(m); hold > 0) t.hold_s = hold;
  return t;
}

std::string WakeAddress(const WakeTarget& t) {
  if (t.deployment.empty()) return "node." + (t.nodes.empty() ? "" : t.nodes.front());
  return "deployment." + t.deployment + "@" + (t.nodes.empty() ? "" : t.nodes.front());
}

Manifest ManifestWithNodesOn(const Manifest& m, const std::vector<std::string>& nodes) {
  Manifest out = m;
  for (const std::string& n : nodes)
    if (auto it = out.nodes.find(n); it != out.nodes.end() && it->second.power.present)
      it->second.power.state = "on";
  return out;
}

int WakeBackoffSeconds(int failures, int backoff_s, int max_backoff_s) {
  if (failures <= 0) return 0;
  int64_t wait = std::max(1, backoff_s);
  for (int i = 1; i < failures && wait < max_backoff_s; ++i) wait *= 2;
  return static_cast<int>(std::min<int64_t>(wait, std::max(backoff_s, max_backoff_s)));
}

std::string RoughDuration(int seconds) {
  if (seconds < 60) return "~" + std::to_string(std::max(1, seconds)) + " s";
  return "~" + std::to_string((seconds + 59) / 60) + " min";
}

std::string WakeErrorBody(const std::string& message, const std::string& code) {
  const nlohmann::json body = {
      {"error",
       {{"message", message}, {"type", "server_error"}, {"param", nullptr}, {"code", code}}}};
  return body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string RequestModel(const std::string& body) {
  const nlohmann::json j = nlohmann::json::parse(body, nullptr, false);
  if (!j.is_object()) return "";
  const auto it = j.find("model");
  return it != j.end() && it->is_string() ? it->get<std::string>() : "";
}

}  // namespace fleet
