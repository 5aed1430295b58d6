#include "src/engine/schedule_policy.h"

#include <algorithm>

namespace fleet {

namespace {

std::string Joined(const std::vector<std::string>& v) {
  std::string s;
  for (const std::string& x : v) s += (s.empty() ? "" : "+") + x;
  return s;
}

// Did a window of `s` end in (from, to]? Either it said up at `from`, or
// it went up and down again in between (a window shorter than a round).
bool WindowEndedBetween(const UpSchedule& s, const ZoneOffsets& zone, int64_t from, int64_t to) {
  if (from <= 0 || from >= to) return false;
  if (ScheduleUpAt(s, zone, from)) return true;
  for (int64_t t = from; t < to;) {
    const auto next = NextScheduleTransition(s, zone, t);
    if (!next || next->at > to) return false;
    if (!next->up) return true;
    t = next->at;
  }
  return false;
}

// A node's own window: inside it, each deployment with a serve on the node
// that sleeps or is stopped is brought up (once: a deployment's own window
// may have asked already), and a sleeping node that holds no serve is
// powered on by itself (a hot spare kept up for a shift); after its end,
// the node is taken down as a deployment's nodes are.
void DecideNode(const ScheduleInput& in, const std::string& node, bool up, ScheduleOutcome* out) {
  const Manifest& m = *in.manifest;
  const UpSchedule& s = m.nodes.at(node).schedule;
  const ZoneOffsets& zone = in.zones.at(s.tz);
  const std::string said = DescribeSchedule(s, zone, in.now_s);
  if (up) {
    bool serves = false;
    for (const auto& [name, d] : m.deployments) {
      if (std::find(d.nodes.begin(), d.nodes.end(), node) == d.nodes.end()) continue;
      serves = true;
      const bool asked =
          std::any_of(out->decisions.begin(), out->decisions.end(), [&](const ScheduleDecision& x) {
            return x.act == ScheduleAct::kBringUp && x.deployment == name;
          });
      if (asked) continue;
      if (!in.awake.count(node))
        out->decisions.push_back(
            {ScheduleAct::kBringUp, name, node, d.nodes,
             "node " + node + "'s " + said + "; " + node + " asleep: up ahead of demand"});
      else if (in.stopped.count(name))
        out->decisions.push_back({ScheduleAct::kBringUp, name, node, d.nodes,
                                  "node " + node + "'s " + said + "; the serve of deployment " +
                                      name + " is not running: up ahead of demand"});
    }
    if (!serves && !in.awake.count(node))
      out->decisions.push_back({ScheduleAct::kBringUp,
                                "",
                                node,
                                {node},
                                "node " + node + "'s " + said + "; " + node +
                                    " asleep and holds no serve: powered on ahead of demand"});
    return;
  }
  const auto was_owed = in.owed_node_down.find(node);
  if (was_owed == in.owed_node_down.end() &&
      !WindowEndedBetween(s, zone, in.last_round_s, in.now_s))
    return;
  if (!in.awake.count(node)) return;  // down: nothing owed any more
  const int64_t since = was_owed != in.owed_node_down.end() ? was_owed->second : in.now_s;
  const std::string why = "node " + node + "'s " + said;
  if (const auto t = in.last_demand.find(node); t != in.last_demand.end() && t->second > since) {
    out->decisions.push_back({ScheduleAct::kLeaveOn,
                              "",
                              node,
                              {node},
                              why + "; the window ended, but a request for its models came since: "
                                    "left to idle off"});
    return;
  }
  out->owed_node_down.emplace(node, since);
  if (out->held_up.count(node)) return;  // a deployment's window says up: owed until it ends
  out->decisions.push_back({ScheduleAct::kTakeDown, "", node, {node}, why + "; the window ended"});
}

}  // namespace

ScheduleOutcome DecideSchedules(const ScheduleInput& in) {
  const Manifest& m = *in.manifest;
  ScheduleOutcome out;
  // Nodes a window holds up first: a node shared with a deployment whose
  // window ended is still not taken down while another's says up.
  std::map<std::string, bool> up_now;
  for (const auto& [name, d] : m.deployments) {
    if (!d.schedule.present || d.nodes.empty()) continue;
    const auto zone = in.zones.find(d.schedule.tz);
    if (zone == in.zones.end()) continue;
    up_now[name] = ScheduleUpAt(d.schedule, zone->second, in.now_s);
    if (!up_now[name]) continue;
    const std::string why = DescribeSchedule(d.schedule, zone->second, in.now_s);
    for (const std::string& n : d.nodes) out.held_up.emplace(n, "deployment " + name + "'s " + why);
  }
  std::map<std::string, bool> node_up_now;
  for (const auto& [name, n] : m.nodes) {
    if (!n.schedule.present) continue;
    const auto zone = in.zones.find(n.schedule.tz);
    if (zone == in.zones.end()) continue;
    node_up_now[name] = ScheduleUpAt(n.schedule, zone->second, in.now_s);
    if (node_up_now[name])
      out.held_up.emplace(
          name, "node " + name + "'s " + DescribeSchedule(n.schedule, zone->second, in.now_s));
  }
  for (const auto& [name, up] : up_now) {
    const DeploymentSpec& d = m.deployments.at(name);
    const ZoneOffsets& zone = in.zones.at(d.schedule.tz);
    const std::string said = DescribeSchedule(d.schedule, zone, in.now_s);
    if (up) {
      std::vector<std::string> asleep;
      for (const std::string& n : d.nodes)
        if (!in.awake.count(n)) asleep.push_back(n);
      if (!asleep.empty())
        out.decisions.push_back({ScheduleAct::kBringUp, name, "", d.nodes,
                                 said + "; " + Joined(asleep) + " asleep: up ahead of demand"});
      else if (in.stopped.count(name))
        out.decisions.push_back(
            {ScheduleAct::kBringUp, name, "", d.nodes,
             said + "; its serve is not running on " + Joined(d.nodes) + ": up ahead of demand"});
      continue;
    }
    const auto was_owed = in.owed_down.find(name);
    if (was_owed == in.owed_down.end() &&
        !WindowEndedBetween(d.schedule, zone, in.last_round_s, in.now_s))
      continue;
    const int64_t since = was_owed != in.owed_down.end() ? was_owed->second : in.now_s;
    std::vector<std::string> on, held, asked;
    for (const std::string& n : d.nodes) {
      if (!in.awake.count(n)) continue;
      (out.held_up.count(n) ? held : on).push_back(n);
      if (const auto t = in.last_demand.find(n); t != in.last_demand.end() && t->second > since)
        asked.push_back(n);
    }
    if (on.empty() && held.empty()) continue;  // down: nothing owed any more
    if (!asked.empty()) {                      // demand since the end: no longer owed
      out.decisions.push_back({ScheduleAct::kLeaveOn, name, "", on,
                               said +
                                   "; the window ended, but a request for its models came "
                                   "since on " +
                                   Joined(asked) + ": left to idle off"});
      continue;
    }
    out.owed_down.emplace(name, since);
    if (!on.empty())
      out.decisions.push_back({ScheduleAct::kTakeDown, name, "", on, said + "; the window ended"});
  }
  for (const auto& [node, up] : node_up_now) DecideNode(in, node, up, &out);
  return out;
}

}  // namespace fleet
