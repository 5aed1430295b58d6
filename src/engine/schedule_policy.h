// What a deployment's `schedule` asks of a `fleet watch --heal` round,
// decided without a node and without reading the clock
// (schedule_round.h acts on it). Inside a window the deployment is up:
// a node of it found asleep, or a serve of it found stopped, is brought up
// ahead of demand (the wake path, with its backoff), and no node of it is
// idled off. At a window's end it is taken down as idle off takes a node
// down (same blockers); the take-down is owed until its nodes are seen off
// or a window starts again, so a node kept on by a person's session goes
// down once the person leaves, unless a request for its models came after
// the end (then idle off decides, as for a node a request woke at night).
// Outside its windows and after that take-down, a deployment is left to
// demand: a request wakes it, idle_off sends it back to sleep. A watch
// that starts outside a window takes nothing down: it did not see the
// window end.
// A node's own `schedule` does the same for the node: inside its window
// every deployment with a serve on it is brought up, a node that holds
// no serve is powered on by itself (the wake path: switch on, read back,
// SSH, its display RAM as declared), and the node is not idled off; at
// the window's end the node is taken down as idle off takes it down,
// unless a deployment's window holds it up or a request for its models
// came since the end.
#ifndef FLEET_SRC_ENGINE_SCHEDULE_POLICY_H_
#define FLEET_SRC_ENGINE_SCHEDULE_POLICY_H_

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "manifests/manifest.h"
#include "src/engine/schedule_clock.h"

namespace fleet {

enum class ScheduleAct {
  kBringUp,   // the window says up, and a node of the deployment sleeps or a serve is stopped
  kTakeDown,  // the window ended and `nodes` are still on
  kLeaveOn,   // the window ended, but a request came since: idle off decides
};

struct ScheduleDecision {
  ScheduleAct act = ScheduleAct::kBringUp;
  // "" for a node's kTakeDown and kLeaveOn, and its kBringUp when it holds
  // no serve (the node alone is powered on)
  std::string deployment;
  std::string node;  // a node's own schedule decided it: that node ("": a deployment's)
  // kBringUp: all of the deployment's (a node alone: that node); kTakeDown:
  // those to take down
  std::vector<std::string> nodes;
  std::string why;  // "schedule daily 08:00-20:00 UTC: up now; ...; dgx3 asleep"
};

struct ScheduleInput {
  const Manifest* manifest = nullptr;
  // By tz name; a schedule whose zone is absent is skipped.
  std::map<std::string, ZoneOffsets> zones;
  std::set<std::string> awake;  // the on_demand nodes the round found on
  // Deployments with a serve found not running (absent or exited) on a
  // node that is on.
  std::set<std::string> stopped;
  int64_t last_round_s = 0;  // unix seconds of the previous round; 0: none
  int64_t now_s = 0;
  // Deployments whose window ended, not yet seen down -> when a round first
  // saw it ended (unix seconds).
  std::map<std::string, int64_t> owed_down;
  // The same for the nodes' own schedules: node -> when a round first saw
  // its window ended.
  std::map<std::string, int64_t> owed_node_down;
  // Node -> when a request for its models last came through a gateway
  // (idle off's clock); absent: not known.
  std::map<std::string, int64_t> last_demand;
};

struct ScheduleOutcome {
  std::vector<ScheduleDecision> decisions;
  std::map<std::string, int64_t> owed_down;       // for the next round's input
  std::map<std::string, int64_t> owed_node_down;  // for the next round's input
  // Node -> why it stays on whatever its idleness: a window of a deployment
  // on it, or its own, says up.
  std::map<std::string, std::string> held_up;
};

ScheduleOutcome DecideSchedules(const ScheduleInput& in);

}  // namespace fleet

#endif  // FLEET_SRC_ENGINE_SCHEDULE_POLICY_H_
