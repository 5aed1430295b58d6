#include "src/plan.h"

#include <gtest/gtest.h>

namespace fleet {
namespace {

Plan SamplePlan() {
  Plan p;
  p.lineage = "abc";
  p.serial = 7;
  PlanChange c;
  c.address = "display_ram.dgx1";
  c.type = "display_ram";
  c.node = "dgx1";
  c.action = Action::kUpdate;
  c.reasons = {"modeset is N, want Y"};
  c.before = {{"mode", "default"}};
  c.after = {{"mode", "unlocked"}};
  c.depends_on = {"node.dgx1"};
  p.changes.push_back(c);
  PlanChange n;
  n.address = "node.dgx1";
  n.type = "node";
  n.node = "dgx1";
  p.changes.push_back(n);
  return p;
}

TEST(PlanTest, JsonRoundTrip) {
  Plan p = SamplePlan();
  nlohmann::json j = p.ToJson();
  EXPECT_EQ(j["format_version"], "1");
  EXPECT_EQ(j["summary"]["update"], 1);
  EXPECT_EQ(j["summary"]["noop"], 1);
  EXPECT_EQ(j["changes"][0]["action"], "update");
  Result<Plan> back = Plan::FromJson(j);
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->ToJson(), j);
}

TEST(PlanTest, HasChanges) {
  Plan p = SamplePlan();
  EXPECT_TRUE(p.HasChanges());
  p.changes[0].action = Action::kNoop;
  EXPECT_FALSE(p.HasChanges());
}

TEST(PlanTest, RejectsMalformed) {
  EXPECT_FALSE(Plan::FromJson(nlohmann::json::array()).ok());
  EXPECT_FALSE(Plan::FromJson({{"format_version", "9"}}).ok());
  nlohmann::json j = SamplePlan().ToJson();
  j["changes"][0]["action"] = "explode";
  Result<Plan> r = Plan::FromJson(j);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("display_ram.dgx1"), std::string::npos);
  j.erase("serial");
  EXPECT_FALSE(Plan::FromJson(j).ok());
}

}  // namespace
}  // namespace fleet
