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
  for (const auto& [name, up] : up_now) {
    const DeploymentSpec& d = m.deployments.at(name);
    const ZoneOffsets& zone = in.zones.at(d.schedule.tz);
    const std::string said = DescribeSchedule(d.schedule, zone, in.now_s);
    if (up) {
      std::vector<std::string> asleep;
      for (const std::string& n : d.nodes)
        if (!in.awake.count(n)) asleep.push_back(n);
      if (!asleep.empty())
        out.decisions.push_back({ScheduleAct::kBringUp, name, d.nodes,
                                 said + "; " + Joined(asleep) + " asleep: up ahead of demand"});
      else if (in.stopped.count(name))
        out.decisions.push_back(
            {ScheduleAct::kBringUp, name, d.nodes,
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
      out.decisions.push_back({ScheduleAct::kLeaveOn, name, on,
                               said +
                                   "; the window ended, but a request for its models came "
                                   "since on " +
                                   Joined(asked) + ": left to idle off"});
      continue;
    }
    out.owed_down.emplace(name, since);
    if (!on.empty())
      out.decisions.push_back({ScheduleAct::kTakeDown, name, on, said + "; the window ended"});
  }
  return out;
}

}  // namespace fleet
