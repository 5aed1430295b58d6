#include "src/engine/idle_policy.h"

#include <gtest/gtest.h>

#include "src/engine/power_lab_test_util.h"

namespace fleet {
namespace {

// Model q on dgx3 (on_demand, idle_off 30m), model r on dgx1 (always on).
Manifest Lab() {
  Manifest m = testing_power::SwitchedNodes({"dgx1", "dgx3"});
  m.nodes["dgx3"].power.state = "on_demand";
  m.nodes["dgx3"].power.idle_off_s = 1800;
  testing_power::AddDeployment(&m, "b", "dgx3", 30001, "q");
  testing_power::AddDeployment(&m, "c", "dgx1", 30002, "r");
  return m;
}

TEST(IdlePolicy, ReadsHaproxysPerBackendRequestCounters) {
  const std::string text =
      "# HELP haproxy_backend_http_requests_total Total number of HTTP requests received.\n"
      "# TYPE haproxy_backend_http_requests_total counter\n"
      "haproxy_backend_http_requests_total{proxy=\"model_q\"} 12\n"
      "haproxy_backend_http_requests_total{proxy=\"model_r\"} 3e+00\n"
      "haproxy_backend_http_requests_total{proxy=\"broken\"} x\n"
      "haproxy_frontend_http_requests_total{proxy=\"gateway_lab\"} 99\n";
  const auto totals = BackendRequestTotals(text);
  EXPECT_EQ(totals.size(), 2u);
  EXPECT_EQ(totals.at("model_q"), 12u);
  EXPECT_EQ(totals.at("model_r"), 3u);
}

TEST(IdlePolicy, FleetsOwnRequestsAreNotDemand) {
  Manifest m = Lab();
  EXPECT_EQ(ModelsOnNode(m, "dgx3"), std::set<std::string>{"q"});
  IdleClock clock;
  const std::set<std::string> awake = {"dgx3"};
  clock.Observe(m, {{"q", 10}}, {}, awake, 1000);  // first sight: busy now
  EXPECT_EQ(clock.IdleFor("dgx3", 1000), 0);
  clock.Observe(m, {{"q", 12}}, {{"q", 2}}, awake, 1600);  // only fleet's two checks
  EXPECT_EQ(clock.IdleFor("dgx3", 1600), 600);
  EXPECT_TRUE(IdleCandidates(m, clock, awake, 2799).empty());
  const auto idle = IdleCandidates(m, clock, awake, 2800);
  ASSERT_EQ(idle.size(), 1u);
  EXPECT_EQ(idle[0].node, "dgx3");
  EXPECT_EQ(idle[0].why, "no request for q through a gateway for 30m (idle_off 30m)");
  m.nodes.at("dgx3").power.idle_off_s = 10;
  ASSERT_EQ(IdleCandidates(m, clock, awake, 1610).size(), 1u);
  EXPECT_EQ(IdleCandidates(m, clock, awake, 1610)[0].why,
            "no request for q through a gateway for 10m (idle_off 10s)");
  clock.Observe(m, {{"q", 15}}, {{"q", 2}}, awake, 2900);  // a client's request
  EXPECT_EQ(clock.IdleFor("dgx3", 2900), 0);
}

TEST(IdlePolicy, AnUnreadOrRestartedCounterKeepsTheNodeBusy) {
  const Manifest m = Lab();
  IdleClock clock;
  const std::set<std::string> awake = {"dgx3"};
  clock.Observe(m, {{"q", 10}}, {}, awake, 1000);
  clock.Observe(m, {}, {}, awake, 5000);  // the gateway did not answer
  EXPECT_EQ(clock.IdleFor("dgx3", 5000), 0);
  clock.Observe(m, {{"q", 3}}, {}, awake, 9000);  // reloaded: the counter restarted
  EXPECT_EQ(clock.IdleFor("dgx3", 9000), 0);
  clock.Observe(m, {{"q", 3}}, {}, {}, 9500);  // asleep: forgotten
  EXPECT_EQ(clock.IdleFor("dgx3", 9500), 0);
}

TEST(IdlePolicy, APersonOrAForeignGpuProcessKeepsTheNodeOn) {
  EXPECT_EQ(IdleBlocker(""), "");
  EXPECT_EQ(IdleBlocker("session alice@pts/0\nsession bob@pts/3\n"),
            "a person is logged in (alice@pts/0 and 1 more)");
  EXPECT_EQ(IdleBlocker("gpu 4242 python3\n"),
            "a GPU process fleet did not start runs (4242 python3)");
  EXPECT_NE(IdleBlockersScript().find("fleet-idle-blockers"), std::string::npos);
}

}  // namespace
}  // namespace fleet
