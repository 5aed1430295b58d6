#include "src/engine/wake_policy.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "src/engine/power_lab_test_util.h"

namespace fleet {
namespace {

// Two deployments of model "q" (a on dgx1, always on; b on dgx3, on
// demand) and one of "r" on dgx1; gateway lab on dgx4 with wake.
Manifest Lab() {
  Manifest m = testing_power::SwitchedNodes({"dgx1", "dgx3", "dgx4"});
  m.nodes["dgx3"].power.state = "on_demand";
  testing_power::AddDeployment(&m, "a", "dgx1", 30000, "q");
  testing_power::AddDeployment(&m, "b", "dgx3", 30001, "q");
  testing_power::AddDeployment(&m, "c", "dgx1", 30002, "r");
  for (auto& [name, d] : m.deployments) {
    d.restart.backoff_s = 20;
    d.restart.max_backoff_s = 100;
  }
  GatewaySpec g;
  g.name = "lab";
  g.nodes = {"dgx4"};
  g.port = 8000;
  g.wake.present = true;
  g.wake.hold_s = 120;
  g.wake.listener_host = "10.0.0.1";
  g.wake.listener_port = 9101;
  m.gateways["lab"] = g;
  return m;
}

TEST(WakeTarget, TheModelsServeOnAnOnDemandNode) {
  const Manifest m = Lab();
  const auto t = WakeTargetFor(m, "q");
  ASSERT_TRUE(t);
  EXPECT_EQ(t->deployment, "b");
  EXPECT_EQ(t->nodes, std::vector<std::string>{"dgx3"});
  EXPECT_EQ(t->head_host, "dgx3.lan");
  EXPECT_EQ(t->head_port, 30001);
  EXPECT_EQ(t->hold_s, 120);
  EXPECT_EQ(t->backoff_s, 20);
  EXPECT_FALSE(WakeTargetFor(m, "r"));  // only on a node that is always on
  EXPECT_FALSE(WakeTargetFor(m, "nope"));
  EXPECT_FALSE(WakeTargetFor(m, ""));
}

TEST(WakeTarget, TheWakeDeclaresItsNodesOnAndNothingElse) {
  const Manifest m = Lab();
  const Manifest woke = ManifestWithNodesOn(m, {"dgx3"});
  EXPECT_EQ(woke.nodes.at("dgx3").power.state, "on");
  EXPECT_EQ(woke.nodes.at("dgx1").power.state, "on");
  EXPECT_EQ(m.nodes.at("dgx3").power.state, "on_demand");  // a copy
}

// A node's own schedule wakes a node that holds no serve: the node alone,
// no model, the built-in backoff (a node has no restart policy), its own
// address (its backoff is apart from any deployment's).
TEST(WakeTarget, ANodeAloneOnlyWhenItIsOnDemand) {
  const Manifest m = Lab();
  const auto t = WakeTargetForNode(m, "dgx3");
  ASSERT_TRUE(t);
  EXPECT_EQ(t->deployment, "");
  EXPECT_EQ(t->model, "");
  EXPECT_EQ(t->nodes, std::vector<std::string>{"dgx3"});
  EXPECT_EQ(t->hold_s, 120);
  EXPECT_EQ(t->backoff_s, 30);
  EXPECT_EQ(t->max_backoff_s, 600);
  EXPECT_EQ(WakeAddress(*t), "node.dgx3");
  EXPECT_EQ(WakeAddress(*WakeTargetForDeployment(m, "b")), "deployment.b@dgx3");
  EXPECT_FALSE(WakeTargetForNode(m, "dgx1"));  // always on
  EXPECT_FALSE(WakeTargetForNode(m, "nope"));
}

TEST(WakeBackoff, DoublesUpToTheMaximum) {
  EXPECT_EQ(WakeBackoffSeconds(0, 30, 600), 0);
  EXPECT_EQ(WakeBackoffSeconds(1, 30, 600), 30);
  EXPECT_EQ(WakeBackoffSeconds(2, 30, 600), 60);
  EXPECT_EQ(WakeBackoffSeconds(3, 30, 600), 120);
  EXPECT_EQ(WakeBackoffSeconds(10, 30, 600), 600);
  EXPECT_EQ(WakeBackoffSeconds(100, 30, 600), 600);
}

TEST(WakeAnswer, RoughDurationsAndTheOpenAiShapedBody) {
  EXPECT_EQ(RoughDuration(4), "~4 s");
  EXPECT_EQ(RoughDuration(41), "~41 s");
  EXPECT_EQ(RoughDuration(60), "~1 min");
  EXPECT_EQ(RoughDuration(230), "~4 min");
  const nlohmann::json body =
      nlohmann::json::parse(WakeErrorBody("waking dgx3 for qwen3.8: ~4 min", "model_waking"));
  EXPECT_EQ(body["error"]["message"], "waking dgx3 for qwen3.8: ~4 min");
  EXPECT_EQ(body["error"]["type"], "server_error");
  EXPECT_EQ(body["error"]["code"], "model_waking");
  EXPECT_TRUE(body["error"]["param"].is_null());
}

TEST(WakeAnswer, TheRequestsModel) {
  EXPECT_EQ(RequestModel(R"({"messages": [], "model": "qwen3.8"})"), "qwen3.8");
  EXPECT_EQ(RequestModel(R"({"model": 3})"), "");
  EXPECT_EQ(RequestModel("not json"), "");
  EXPECT_EQ(RequestModel(""), "");
}

}  // namespace
}  // namespace fleet
