#include "src/engine/schedule_round.h"

#include "providers/shared/serving/deployment_json.h"
#include "providers/shared/serving/deployment_probe.h"
#include "src/engine/node_take_down.h"
#include "src/engine/schedule_policy.h"
#include "src/engine/wake_policy.h"
#include "src/resource.h"
#include "state/state.h"

namespace fleet {

namespace {

// A decision's event: a deployment's window names the deployment's head,
// a node's own window the node (and the deployment it brings up).
nlohmann::json ScheduleEvent(const Manifest& m, const ScheduleDecision& d, const std::string& what,
                             const std::string& why) {
  nlohmann::json e = {{"event", "schedule"},
                      {"time", NowRfc3339()},
                      {"nodes", d.nodes},
                      {"outcome", what},
                      {"detail", why}};
  if (!d.deployment.empty()) e["deployment"] = d.deployment;
  if (d.node.empty()) {
    e["address"] =
        "deployment." + d.deployment + "@" + m.deployments.at(d.deployment).nodes.front();
  } else {
    e["address"] = "node." + d.node;
    e["node"] = d.node;
  }
  return e;
}

}  // namespace

std::vector<nlohmann::json> ScheduleRound::Round(const ScheduleRoundInput& in,
                                                 std::map<std::string, std::string>* held_up) {
  const Manifest& m = *in.manifest;
  std::vector<nlohmann::json> events;
  ScheduleInput decide;
  decide.manifest = &m;
  auto load_zone = [&](const UpSchedule& s) {
    if (!s.present || decide.zones.count(s.tz)) return;
    Result<ZoneOffsets> zone = ZoneOffsets::Load(s.tz);
    if (zone.ok()) decide.zones.emplace(s.tz, std::move(*zone));
  };
  for (const auto& [name, d] : m.deployments) load_zone(d.schedule);
  for (const auto& [name, n] : m.nodes) load_zone(n.schedule);
  if (decide.zones.empty()) return events;
  for (const auto& [name, spec] : m.nodes) {
    if (!spec.power.present || spec.power.state != "on_demand") continue;
    const auto f = in.probed->facts.find(name);
    if (f != in.probed->facts.end() && f->second.reachable) decide.awake.insert(name);
  }
  for (const auto& [address, actual] : in.probed->actual) {
    const std::string name = ResourceName("deployment", address);
    if (name.empty() || !actual.probed || !actual.error.empty()) continue;
    const ContainerProbe p = actual.attributes.get<ContainerProbe>();
    if (!p.exists || p.state != "running") decide.stopped.insert(name);
  }
  decide.last_round_s = last_round_s_;
  decide.now_s = in.now_s;
  decide.owed_down = owed_down_;
  decide.owed_node_down = owed_node_down_;
  decide.last_demand = in.last_demand;
  const ScheduleOutcome outcome = DecideSchedules(decide);
  last_round_s_ = in.now_s;
  owed_down_ = outcome.owed_down;
  owed_node_down_ = outcome.owed_node_down;
  *held_up = outcome.held_up;

  // What a decision is about: its deployment, or a node's own window (and
  // the deployment it brings up).
  auto subject = [](const ScheduleDecision& d) {
    return d.node.empty() ? d.deployment : "node " + d.node + " " + d.deployment;
  };
  auto report = [&](const ScheduleDecision& d, const std::string& what, const std::string& why) {
    const std::string said = what + " " + why;
    if (reported_[subject(d)] == said) return;  // said already
    reported_[subject(d)] = said;
    events.push_back(ScheduleEvent(m, d, what, why));
  };
  std::set<std::string> decided;
  for (const ScheduleDecision& d : outcome.decisions) {
    decided.insert(subject(d));
    if (d.act == ScheduleAct::kBringUp) {
      const std::optional<WakeTarget> target = d.deployment.empty()
                                                   ? WakeTargetForNode(m, d.node)
                                                   : WakeTargetForDeployment(m, d.deployment);
      if (!target || in.waker == nullptr) continue;
      const WakeStart started = in.waker->Wake(*target, "schedule");
      if (started.running)
        report(d, "waking", d.why);
      else
        report(d, "backing_off",
               d.why + "; the last wake failed: " + started.backoff_cause + "; next try in " +
                   RoughDuration(started.retry_s));
      continue;
    }
    if (d.act == ScheduleAct::kLeaveOn) {
      report(d, "left_on", d.why);
      continue;
    }
    std::string downs, kept, failed;
    for (const std::string& node : d.nodes) {
      const TakeDownResult done = TakeNodeDown(m, in.store, node, [&](const std::string& line) {
        if (in.progress) in.progress("schedule down " + node + ": " + line);
      });
      std::string& into = done.outcome == TakeDownOutcome::kPoweredOff ? downs
                          : done.outcome == TakeDownOutcome::kKept     ? kept
                                                                       : failed;
      into += (into.empty() ? "" : "; ") + node + ": " + done.why;
    }
    if (!failed.empty())
      report(d, "failed", d.why + "; " + failed);
    else if (!kept.empty())
      report(d, "kept", d.why + "; kept on: " + kept);
    else
      report(d, "powered_off", d.why + "; " + downs);
  }
  // A deployment with nothing to do now: its next decision is news again.
  std::erase_if(reported_, [&](const auto& r) { return !decided.count(r.first); });
  for (const nlohmann::json& e : events)
    if (Status s = in.store->AppendEvent(e); !s.ok() && in.progress)
      in.progress("schedule: cannot record the event: " + s.message());
  return events;
}

}  // namespace fleet
