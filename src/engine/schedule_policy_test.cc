#include "src/engine/schedule_policy.h"

#include <gtest/gtest.h>

#include "manifests/power_policy.h"

namespace fleet {
namespace {

// 2026-12-07, a Monday, 00:00 UTC.
constexpr int64_t kMonday = 1796601600;
constexpr int64_t kHour = 3600;

// Deployment b on dgx3 (on_demand) with "daily 08:00-20:00" in UTC;
// deployment c on dgx1 (always on), no schedule.
Manifest Lab(const std::string& window = "daily 08:00-20:00") {
  Manifest m;
  for (const char* n : {"dgx1", "dgx3"}) {
    NodeSpec node;
    node.name = n;
    node.power.present = true;
    node.power.switch_entity = std::string("switch.") + n;
    m.nodes[n] = node;
  }
  m.nodes["dgx3"].power.state = "on_demand";
  DeploymentSpec b;
  b.name = "b";
  b.nodes = {"dgx3"};
  b.schedule.present = true;
  b.schedule.tz = "UTC";
  std::string why;
  b.schedule.windows.push_back(*ParseScheduleWindow(window, &why));
  m.deployments["b"] = b;
  DeploymentSpec c;
  c.name = "c";
  c.nodes = {"dgx1"};
  m.deployments["c"] = c;
  return m;
}

ScheduleInput At(const Manifest& m, int64_t last, int64_t now, std::set<std::string> awake) {
  ScheduleInput in;
  in.manifest = &m;
  in.zones.emplace("UTC", *ZoneOffsets::Load("UTC"));
  in.awake = std::move(awake);
  in.last_round_s = last;
  in.now_s = now;
  return in;
}

TEST(SchedulePolicy, AWindowThatSaysUpBringsASleepingNodeUpAndHoldsItOn) {
  const Manifest m = Lab();
  // 08:00:30, the round after the window's start: dgx3 sleeps.
  ScheduleOutcome o =
      DecideSchedules(At(m, kMonday + 8 * kHour - 30, kMonday + 8 * kHour + 30, {}));
  ASSERT_EQ(o.decisions.size(), 1u);
  EXPECT_EQ(o.decisions[0].act, ScheduleAct::kBringUp);
  EXPECT_EQ(o.decisions[0].deployment, "b");
  EXPECT_EQ(o.decisions[0].nodes, std::vector<std::string>{"dgx3"});
  EXPECT_EQ(o.decisions[0].why,
            "schedule daily 08:00-20:00 UTC: up now; down at Mon 2026-12-07 20:00 UTC (20:00 "
            "UTC); dgx3 asleep: up ahead of demand");
  EXPECT_EQ(o.held_up.count("dgx3"), 1u);
  EXPECT_EQ(o.held_up.count("dgx1"), 0u);
  // Awake within the window: nothing to do, still held on (no idle off).
  o = DecideSchedules(At(m, kMonday + 9 * kHour, kMonday + 9 * kHour + 60, {"dgx3"}));
  EXPECT_TRUE(o.decisions.empty());
  EXPECT_NE(o.held_up.at("dgx3").find("deployment b's schedule daily 08:00-20:00 UTC: up now"),
            std::string::npos);
  // Awake, but its serve is stopped (a wake that failed left the node on).
  ScheduleInput in = At(m, kMonday + 9 * kHour, kMonday + 9 * kHour + 60, {"dgx3"});
  in.stopped = {"b"};
  o = DecideSchedules(in);
  ASSERT_EQ(o.decisions.size(), 1u);
  EXPECT_EQ(o.decisions[0].act, ScheduleAct::kBringUp);
  EXPECT_NE(o.decisions[0].why.find("its serve is not running on dgx3"), std::string::npos);
}

TEST(SchedulePolicy, AWindowsEndTakesItsNodesDownOnce) {
  const Manifest m = Lab();
  // 19:59:50 -> 20:00:10: the window ended between the rounds.
  ScheduleOutcome o =
      DecideSchedules(At(m, kMonday + 20 * kHour - 10, kMonday + 20 * kHour + 10, {"dgx3"}));
  ASSERT_EQ(o.decisions.size(), 1u);
  EXPECT_EQ(o.decisions[0].act, ScheduleAct::kTakeDown);
  EXPECT_EQ(o.decisions[0].nodes, std::vector<std::string>{"dgx3"});
  EXPECT_EQ(o.decisions[0].why,
            "schedule daily 08:00-20:00 UTC: down now; up at Tue 2026-12-08 08:00 UTC (08:00 "
            "UTC); the window ended");
  EXPECT_TRUE(o.held_up.empty());
  ASSERT_EQ(o.owed_down.size(), 1u);
  EXPECT_EQ(o.owed_down.at("b"), kMonday + 20 * kHour + 10);
  // Kept on (a person logged in): the next round still owes the take-down.
  ScheduleInput next = At(m, kMonday + 20 * kHour + 10, kMonday + 21 * kHour, {"dgx3"});
  next.owed_down = o.owed_down;
  o = DecideSchedules(next);
  ASSERT_EQ(o.decisions.size(), 1u);
  EXPECT_EQ(o.decisions[0].act, ScheduleAct::kTakeDown);
  // Seen down: nothing owed; a request that wakes it later is idle off's.
  next = At(m, kMonday + 21 * kHour, kMonday + 21 * kHour + 60, {});
  next.owed_down = o.owed_down;
  o = DecideSchedules(next);
  EXPECT_TRUE(o.decisions.empty());
  EXPECT_TRUE(o.owed_down.empty());
  o = DecideSchedules(At(m, kMonday + 22 * kHour, kMonday + 22 * kHour + 60, {"dgx3"}));
  EXPECT_TRUE(o.decisions.empty());
}

TEST(SchedulePolicy, ARequestAfterTheWindowsEndCallsTheTakeDownOff) {
  const Manifest m = Lab();
  // Kept on at the end (a person logged in); a request came at 20:30.
  ScheduleInput in = At(m, kMonday + 21 * kHour - 60, kMonday + 21 * kHour, {"dgx3"});
  in.owed_down = {{"b", kMonday + 20 * kHour + 10}};
  in.last_demand = {{"dgx3", kMonday + 20 * kHour + 1800}};
  ScheduleOutcome o = DecideSchedules(in);
  ASSERT_EQ(o.decisions.size(), 1u);
  EXPECT_EQ(o.decisions[0].act, ScheduleAct::kLeaveOn);
  EXPECT_NE(
      o.decisions[0].why.find("a request for its models came since on dgx3: left to idle off"),
      std::string::npos);
  EXPECT_TRUE(o.owed_down.empty());
  // A request before the end does not.
  in.last_demand = {{"dgx3", kMonday + 19 * kHour}};
  o = DecideSchedules(in);
  ASSERT_EQ(o.decisions.size(), 1u);
  EXPECT_EQ(o.decisions[0].act, ScheduleAct::kTakeDown);
}

TEST(SchedulePolicy, AWatchThatStartsOutsideAWindowTakesNothingDown) {
  const Manifest m = Lab();
  ScheduleOutcome o = DecideSchedules(At(m, 0, kMonday + 22 * kHour, {"dgx3"}));
  EXPECT_TRUE(o.decisions.empty());
  EXPECT_TRUE(o.owed_down.empty());
  // Asleep outside the window: left asleep.
  o = DecideSchedules(At(m, kMonday + 22 * kHour, kMonday + 22 * kHour + 60, {}));
  EXPECT_TRUE(o.decisions.empty());
}

TEST(SchedulePolicy, AWindowShorterThanARoundStillEnds) {
  const Manifest m = Lab("daily 08:00-08:01");
  const ScheduleOutcome o =
      DecideSchedules(At(m, kMonday + 8 * kHour - 60, kMonday + 8 * kHour + 120, {"dgx3"}));
  ASSERT_EQ(o.decisions.size(), 1u);
  EXPECT_EQ(o.decisions[0].act, ScheduleAct::kTakeDown);
}

TEST(SchedulePolicy, ANightShiftInBerlinEndsInTheMorningLocalTime) {
  Manifest m = Lab("Mon-Fri 22:00-06:00");
  m.deployments["b"].schedule.tz = "Europe/Berlin";
  ScheduleInput in = At(m, 0, 0, {"dgx3"});
  in.zones.emplace("Europe/Berlin", *ZoneOffsets::Load("Europe/Berlin"));
  // Tue 06:00 Berlin is Tue 05:00 UTC (CET).
  const int64_t end = kMonday + 29 * kHour;
  in.last_round_s = end - 60;
  in.now_s = end - 1;
  EXPECT_TRUE(DecideSchedules(in).decisions.empty());
  EXPECT_EQ(DecideSchedules(in).held_up.count("dgx3"), 1u);
  in.now_s = end + 1;
  const ScheduleOutcome o = DecideSchedules(in);
  ASSERT_EQ(o.decisions.size(), 1u);
  EXPECT_EQ(o.decisions[0].act, ScheduleAct::kTakeDown);
}

TEST(SchedulePolicy, ANodeAnotherWindowHoldsUpIsNotTakenDown) {
  Manifest m = Lab();
  DeploymentSpec e = m.deployments.at("b");
  e.name = "e";
  std::string why;
  e.schedule.windows = {*ParseScheduleWindow("daily 08:00-22:00", &why)};
  m.deployments["e"] = e;
  const ScheduleOutcome o =
      DecideSchedules(At(m, kMonday + 20 * kHour - 10, kMonday + 20 * kHour + 10, {"dgx3"}));
  EXPECT_TRUE(o.decisions.empty());
  EXPECT_EQ(o.owed_down.count("b"), 1u);  // when e's window ends too
  EXPECT_NE(o.held_up.at("dgx3").find("deployment e's"), std::string::npos);
}

TEST(SchedulePolicy, AScheduleWhoseZoneCouldNotBeReadIsSkipped) {
  Manifest m = Lab();
  m.deployments["b"].schedule.tz = "Europe/Berlin";  // not in the input's zones
  const ScheduleOutcome o = DecideSchedules(At(m, 0, kMonday + 9 * kHour, {}));
  EXPECT_TRUE(o.decisions.empty());
  EXPECT_TRUE(o.held_up.empty());
}

// Lab() with b's schedule moved to its node: dgx3 "daily 08:00-20:00" UTC.
Manifest NodeLab(const std::string& window = "daily 08:00-20:00") {
  Manifest m = Lab();
  m.nodes["dgx3"].schedule = m.deployments["b"].schedule;
  std::string why;
  m.nodes["dgx3"].schedule.windows = {*ParseScheduleWindow(window, &why)};
  m.deployments["b"].schedule = UpSchedule();
  return m;
}

TEST(SchedulePolicy, ANodesWindowBringsUpTheServesOnItAndHoldsItOn) {
  const Manifest m = NodeLab();
  ScheduleOutcome o =
      DecideSchedules(At(m, kMonday + 8 * kHour - 30, kMonday + 8 * kHour + 30, {}));
  ASSERT_EQ(o.decisions.size(), 1u);
  EXPECT_EQ(o.decisions[0].act, ScheduleAct::kBringUp);
  EXPECT_EQ(o.decisions[0].deployment, "b");
  EXPECT_EQ(o.decisions[0].node, "dgx3");
  EXPECT_EQ(o.decisions[0].why,
            "node dgx3's schedule daily 08:00-20:00 UTC: up now; down at Mon 2026-12-07 20:00 "
            "UTC (20:00 UTC); dgx3 asleep: up ahead of demand");
  EXPECT_NE(o.held_up.at("dgx3").find("node dgx3's schedule daily 08:00-20:00 UTC: up now"),
            std::string::npos);
  // Awake with its serve stopped: brought up; awake and serving: nothing.
  ScheduleInput in = At(m, kMonday + 9 * kHour, kMonday + 9 * kHour + 60, {"dgx3"});
  in.stopped = {"b"};
  o = DecideSchedules(in);
  ASSERT_EQ(o.decisions.size(), 1u);
  EXPECT_NE(o.decisions[0].why.find("the serve of deployment b is not running"), std::string::npos);
  o = DecideSchedules(At(m, kMonday + 9 * kHour, kMonday + 9 * kHour + 60, {"dgx3"}));
  EXPECT_TRUE(o.decisions.empty());
  EXPECT_EQ(o.held_up.count("dgx3"), 1u);
}

// A hot spare: dgx3 with its own window and no serve on it. The window's
// start powers the node itself on (a decision without a deployment); once
// it is on, nothing more, and it is held on; after the end, taken down.
TEST(SchedulePolicy, ANodesWindowPowersOnANodeThatHoldsNoServe) {
  Manifest m = NodeLab();
  m.deployments.erase("b");
  ScheduleOutcome o =
      DecideSchedules(At(m, kMonday + 8 * kHour - 30, kMonday + 8 * kHour + 30, {}));
  ASSERT_EQ(o.decisions.size(), 1u);
  EXPECT_EQ(o.decisions[0].act, ScheduleAct::kBringUp);
  EXPECT_EQ(o.decisions[0].deployment, "");
  EXPECT_EQ(o.decisions[0].node, "dgx3");
  EXPECT_EQ(o.decisions[0].nodes, std::vector<std::string>{"dgx3"});
  EXPECT_EQ(o.decisions[0].why,
            "node dgx3's schedule daily 08:00-20:00 UTC: up now; down at Mon 2026-12-07 20:00 "
            "UTC (20:00 UTC); dgx3 asleep and holds no serve: powered on ahead of demand");
  EXPECT_EQ(o.held_up.count("dgx3"), 1u);
  // Asleep again within the window (cut by hand, or a wake that failed):
  // asked again (the wake path's backoff decides whether it tries).
  o = DecideSchedules(At(m, kMonday + 9 * kHour, kMonday + 9 * kHour + 60, {}));
  ASSERT_EQ(o.decisions.size(), 1u);
  EXPECT_EQ(o.decisions[0].node, "dgx3");
  // On: held on, nothing to bring up.
  o = DecideSchedules(At(m, kMonday + 9 * kHour, kMonday + 9 * kHour + 60, {"dgx3"}));
  EXPECT_TRUE(o.decisions.empty());
  EXPECT_EQ(o.held_up.count("dgx3"), 1u);
  // Outside its window, asleep: nothing (no demand can wake a node that
  // serves nothing, and the schedule does not).
  EXPECT_TRUE(DecideSchedules(At(m, kMonday + 21 * kHour, kMonday + 21 * kHour + 60, {}))
                  .decisions.empty());
  // Its window's end takes it down as any node's.
  o = DecideSchedules(At(m, kMonday + 20 * kHour - 10, kMonday + 20 * kHour + 10, {"dgx3"}));
  ASSERT_EQ(o.decisions.size(), 1u);
  EXPECT_EQ(o.decisions[0].act, ScheduleAct::kTakeDown);
  EXPECT_EQ(o.decisions[0].node, "dgx3");
}

TEST(SchedulePolicy, ANodeAndADeploymentWindowUpTogetherWakeTheDeploymentOnce) {
  Manifest m = NodeLab();
  m.deployments["b"].schedule = m.nodes["dgx3"].schedule;
  const ScheduleOutcome o =
      DecideSchedules(At(m, kMonday + 8 * kHour - 30, kMonday + 8 * kHour + 30, {}));
  ASSERT_EQ(o.decisions.size(), 1u);
  EXPECT_EQ(o.decisions[0].deployment, "b");
  EXPECT_EQ(o.decisions[0].node, "");  // the deployment's own window asked first
}

TEST(SchedulePolicy, ANodesWindowEndTakesTheNodeDownOnceAsIdleOffWould) {
  const Manifest m = NodeLab();
  ScheduleOutcome o =
      DecideSchedules(At(m, kMonday + 20 * kHour - 10, kMonday + 20 * kHour + 10, {"dgx3"}));
  ASSERT_EQ(o.decisions.size(), 1u);
  EXPECT_EQ(o.decisions[0].act, ScheduleAct::kTakeDown);
  EXPECT_EQ(o.decisions[0].node, "dgx3");
  EXPECT_EQ(o.decisions[0].deployment, "");
  EXPECT_EQ(o.decisions[0].nodes, std::vector<std::string>{"dgx3"});
  EXPECT_EQ(o.decisions[0].why,
            "node dgx3's schedule daily 08:00-20:00 UTC: down now; up at Tue 2026-12-08 08:00 "
            "UTC (08:00 UTC); the window ended");
  EXPECT_TRUE(o.held_up.empty());
  EXPECT_TRUE(o.owed_down.empty());
  ASSERT_EQ(o.owed_node_down.count("dgx3"), 1u);
  // Kept on (a person logged in): still owed the next round.
  ScheduleInput next = At(m, kMonday + 20 * kHour + 10, kMonday + 21 * kHour, {"dgx3"});
  next.owed_node_down = o.owed_node_down;
  o = DecideSchedules(next);
  ASSERT_EQ(o.decisions.size(), 1u);
  EXPECT_EQ(o.decisions[0].act, ScheduleAct::kTakeDown);
  // Seen down: nothing owed.
  next = At(m, kMonday + 21 * kHour, kMonday + 21 * kHour + 60, {});
  next.owed_node_down = o.owed_node_down;
  o = DecideSchedules(next);
  EXPECT_TRUE(o.decisions.empty());
  EXPECT_TRUE(o.owed_node_down.empty());
  // A watch that starts outside the window takes nothing down.
  EXPECT_TRUE(DecideSchedules(At(m, 0, kMonday + 22 * kHour, {"dgx3"})).decisions.empty());
}

TEST(SchedulePolicy, ARequestAfterANodesWindowEndLeavesItToIdleOff) {
  const Manifest m = NodeLab();
  ScheduleInput in = At(m, kMonday + 21 * kHour - 60, kMonday + 21 * kHour, {"dgx3"});
  in.owed_node_down = {{"dgx3", kMonday + 20 * kHour + 10}};
  in.last_demand = {{"dgx3", kMonday + 20 * kHour + 1800}};
  ScheduleOutcome o = DecideSchedules(in);
  ASSERT_EQ(o.decisions.size(), 1u);
  EXPECT_EQ(o.decisions[0].act, ScheduleAct::kLeaveOn);
  EXPECT_NE(o.decisions[0].why.find("a request for its models came since: left to idle off"),
            std::string::npos);
  EXPECT_TRUE(o.owed_node_down.empty());
}

TEST(SchedulePolicy, ADeploymentsWindowHoldsUpANodeWhoseOwnWindowEnded) {
  Manifest m = NodeLab();
  std::string why;
  m.deployments["b"].schedule = m.nodes["dgx3"].schedule;
  m.deployments["b"].schedule.windows = {*ParseScheduleWindow("daily 08:00-22:00", &why)};
  ScheduleOutcome o =
      DecideSchedules(At(m, kMonday + 20 * kHour - 10, kMonday + 20 * kHour + 10, {"dgx3"}));
  EXPECT_TRUE(o.decisions.empty());
  EXPECT_EQ(o.owed_node_down.count("dgx3"), 1u);  // taken down when b's window ends too
  EXPECT_NE(o.held_up.at("dgx3").find("deployment b's"), std::string::npos);
  // And the other way round: the node's window holds the deployment's node.
  m = NodeLab("daily 08:00-22:00");
  m.deployments["b"].schedule = m.nodes["dgx3"].schedule;
  m.deployments["b"].schedule.windows = {*ParseScheduleWindow("daily 08:00-20:00", &why)};
  o = DecideSchedules(At(m, kMonday + 20 * kHour - 10, kMonday + 20 * kHour + 10, {"dgx3"}));
  EXPECT_TRUE(o.decisions.empty());
  EXPECT_EQ(o.owed_down.count("b"), 1u);
  EXPECT_NE(o.held_up.at("dgx3").find("node dgx3's"), std::string::npos);
}

}  // namespace
}  // namespace fleet
