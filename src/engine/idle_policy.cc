#include "src/engine/idle_policy.h"

#include <algorithm>
#include <cstdlib>
#include <sstream>

#include "idle_blockers_sh.h"
#include "providers/gateway/gateway_provider.h"
#include "src/shell_quote.h"

namespace fleet {

namespace {

// "31m", "2h5m": how an idleness reads next to its idle_off.
std::string IdleMinutes(int64_t seconds) {
  if (seconds < 60) return std::to_string(seconds) + "s";
  const int64_t m = seconds / 60;
  if (m < 60) return std::to_string(m) + "m";
  return std::to_string(m / 60) + "h" + (m % 60 ? std::to_string(m % 60) + "m" : "");
}

}  // namespace

std::map<std::string, uint64_t> BackendRequestTotals(const std::string& text) {
  std::map<std::string, uint64_t> out;
  std::istringstream in(text);
  const std::string metric = "haproxy_backend_http_requests_total{";
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(metric, 0) != 0) continue;
    const size_t at = line.find("proxy=\"");
    const size_t close = line.find('}');
    if (at == std::string::npos || close == std::string::npos || at > close) continue;
    const size_t start = at + 7;
    const size_t end = line.find('"', start);
    if (end == std::string::npos || end > close) continue;
    const std::string value = line.substr(close + 1);
    char* stop = nullptr;
    const double v = std::strtod(value.c_str(), &stop);
    if (stop == value.c_str() || v < 0) continue;
    out[line.substr(start, end - start)] = static_cast<uint64_t>(v);
  }
  return out;
}

std::set<std::string> ModelsOnNode(const Manifest& m, const std::string& node) {
  std::set<std::string> models;
  std::vector<std::string> unnamed;
  for (const GatewayRoute& r : GatewayRoutes(m, &unnamed)) {
    const auto d = m.deployments.find(r.deployment);
    if (d != m.deployments.end() &&
        std::count(d->second.nodes.begin(), d->second.nodes.end(), node) > 0)
      models.insert(r.model);
  }
  return models;
}

void IdleClock::Observe(const Manifest& m, const std::map<std::string, uint64_t>& totals,
                        const std::map<std::string, int>& own, const std::set<std::string>& awake,
                        int64_t now_s) {
  std::set<std::string> busy_models;
  for (const auto& [model, total] : totals) {
    const auto last = last_total_.find(model);
    const int fleets = own.count(model) ? own.at(model) : 0;
    // First sight, or a counter that went down (HAProxy restarted): busy.
    if (last == last_total_.end() || total < last->second ||
        total - last->second > static_cast<uint64_t>(std::max(0, fleets)))
      busy_models.insert(model);
    last_total_[model] = total;
  }
  for (const std::string& node : awake) {
    bool busy = !last_demand_.count(node);
    for (const std::string& model : ModelsOnNode(m, node))
      busy = busy || busy_models.count(model) > 0 || !totals.count(model);
    if (busy) last_demand_[node] = now_s;
  }
  for (auto it = last_demand_.begin(); it != last_demand_.end();)
    it = awake.count(it->first) ? std::next(it) : last_demand_.erase(it);
}

int64_t IdleClock::IdleFor(const std::string& node, int64_t now_s) const {
  const auto it = last_demand_.find(node);
  return it == last_demand_.end() ? 0 : std::max<int64_t>(0, now_s - it->second);
}

void IdleClock::Forget(const std::string& node) { last_demand_.erase(node); }

std::vector<IdleCandidate> IdleCandidates(const Manifest& m, const IdleClock& clock,
                                          const std::set<std::string>& awake, int64_t now_s) {
  std::vector<IdleCandidate> out;
  for (const std::string& node : awake) {
    const auto n = m.nodes.find(node);
    if (n == m.nodes.end() || !n->second.power.present || n->second.power.state != "on_demand" ||
        n->second.power.idle_off_s <= 0)
      continue;
    const int64_t idle = clock.IdleFor(node, now_s);
    if (idle < n->second.power.idle_off_s) continue;
    std::string models;
    for (const std::string& model : ModelsOnNode(m, node))
      models += (models.empty() ? "" : ", ") + model;
    out.push_back({node, "no request for " + (models.empty() ? std::string("its models") : models) +
                             " through a gateway for " + IdleMinutes(idle) + " (idle_off " +
                             IdleMinutes(n->second.power.idle_off_s) + ")"});
  }
  return out;
}

std::string IdleBlocker(const std::string& out) {
  std::istringstream in(out);
  std::vector<std::string> sessions, gpu;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("session ", 0) == 0) sessions.push_back(line.substr(8));
    if (line.rfind("gpu ", 0) == 0) gpu.push_back(line.substr(4));
  }
  std::string why;
  if (!sessions.empty()) {
    why = "a person is logged in (" + sessions.front() +
          (sessions.size() > 1 ? " and " + std::to_string(sessions.size() - 1) + " more" : "") +
          ")";
  }
  if (!gpu.empty())
    why += (why.empty() ? "" : "; ") + std::string("a GPU process fleet did not start runs (") +
           gpu.front() + ")";
  return why;
}

std::string IdleBlockersScript() {
  return "sh -c " + ShellQuote(std::string(kIdleBlockersScript, kIdleBlockersScriptSize)) +
         " fleet-idle-blockers";
}

}  // namespace fleet
