#include "src/engine/copy_routes.h"

#include <algorithm>
#include <tuple>

namespace fleet {

namespace {

struct RouteGroup {
  const CopyRoute* first;  // what, from and the route every copy of the group shares
  std::vector<std::string> targets;
};

bool SameRoute(const CopyRoute& a, const CopyRoute& b) {
  return std::tie(a.what, a.from, a.direct, a.fabric, a.why_not) ==
         std::tie(b.what, b.from, b.direct, b.fabric, b.why_not);
}

std::string Line(const RouteGroup& g) {
  const CopyRoute& r = *g.first;
  if (!r.chain.empty()) {
    std::string line = r.what + ": " + r.from;
    for (const CopyRoute::Hop& h : r.chain) line += " \u2192 " + h.node;
    return line + " over fabric " + r.fabric + " (one chain: each byte leaves " + r.from +
           " once)";
  }
  std::string to;
  for (const std::string& t : g.targets) to += (to.empty() ? "" : ", ") + t;
  std::string line = r.what + ": " + r.from + " \u2192 " + to;
  if (r.direct) return line + " over fabric " + r.fabric;
  return line + " through the controller" + (r.why_not.empty() ? "" : " (" + r.why_not + ")");
}

}  // namespace

std::vector<std::string> CopyRouteLines(const Plan& plan) {
  std::vector<RouteGroup> groups;
  for (const PlanChange& c : plan.changes) {
    if (!c.copy || c.action == Action::kNoop || !c.error.empty()) continue;
    auto g = std::find_if(groups.begin(), groups.end(),
                          [&](const RouteGroup& x) { return SameRoute(*x.first, *c.copy); });
    if (g == groups.end()) g = groups.insert(groups.end(), RouteGroup{&*c.copy, {}});
    if (std::find(g->targets.begin(), g->targets.end(), c.copy->to) == g->targets.end())
      g->targets.push_back(c.copy->to);
  }
  std::vector<std::string> lines;
  for (const RouteGroup& g : groups) lines.push_back(Line(g));
  return lines;
}

}  // namespace fleet
