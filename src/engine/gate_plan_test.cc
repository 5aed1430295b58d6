#include "src/engine/gate_plan.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "providers/shared/serving/deployment_json.h"

namespace fleet {
namespace {

// lab on dgx1 behind gateway gw on dgx2; dgx3 free; images v1 and v2.
Manifest Lab() {
  Manifest m;
  for (const char* n : {"dgx1", "dgx2", "dgx3"}) m.nodes[n].name = n;
  DeploymentSpec d;
  d.name = "lab";
  d.nodes = {"dgx1"};
  d.image = "v2";
  d.recipe.args = {"fake-engine", "--port", "{port}"};
  d.promote = PromotePolicy{};
  m.deployments["lab"] = d;
  GatewaySpec g;
  g.name = "gw";
  g.nodes = {"dgx2"};
  m.gateways["gw"] = g;
  return m;
}

nlohmann::json Want(const std::string& image, const std::string& spec) {
  DeploymentWant w;
  w.shown.container = "fleet-lab";
  w.shown.image = image;
  w.shown.spec = spec;
  w.shown.command = {"fake-engine"};
  return w;
}

PlanChange Change(const std::string& address, const std::string& node, Action a) {
  PlanChange c;
  c.address = address;
  c.type = address.substr(0, address.find('.'));
  c.node = node;
  c.action = a;
  return c;
}

// The image changes v1 -> v2 on dgx1; v2 is staged on dgx3 (a noop there),
// v1 is removed from dgx1.
Plan ImageChange() {
  Plan p;
  PlanChange d = Change("deployment.lab@dgx1", "dgx1", Action::kReplace);
  d.before = Want("r/v1@sha256:1", "spec1");
  d.after = Want("r/v2@sha256:2", "spec2");
  d.depends_on = {"node.dgx1", "image.v2@dgx1"};
  p.changes = {Change("node.dgx3", "dgx3", Action::kNoop),
               Change("image.v2@dgx3", "dgx3", Action::kNoop),
               Change("image.v2@dgx1", "dgx1", Action::kCreate),
               Change("image.v1@dgx1", "dgx1", Action::kDelete),
               d,
               Change("gateway.gw@dgx2", "dgx2", Action::kNoop)};
  p.changes.back().reasons = {
      "gateway gw answers 503 for lab while deployment.lab@dgx1 is replaced in place (x)"};
  return p;
}

bool DependsOn(const PlanChange& c, const std::string& a) {
  return std::find(c.depends_on.begin(), c.depends_on.end(), a) != c.depends_on.end();
}

TEST(GatePlanTest, AnImageChangeIsGatedBesideOnTheFreeNode) {
  Plan p = ImageChange();
  MarkGatedChanges(Lab(), {}, false, &p);
  const PlanChange& d = *p.Find("deployment.lab@dgx1");
  ASSERT_TRUE(d.gate.has_value());
  EXPECT_EQ(d.gate->candidate, "dgx3");
  EXPECT_EQ(d.gate->profile, "quick");
  EXPECT_NE(d.summary.find("gated: benched beside the old serve on dgx3 first"), std::string::npos);
  EXPECT_TRUE(DependsOn(d, "image.v2@dgx3"));
  EXPECT_TRUE(DependsOn(d, "node.dgx3"));
  // The old image waits for the gate; the gateway's in-place note is gone.
  EXPECT_TRUE(DependsOn(*p.Find("image.v1@dgx1"), "deployment.lab@dgx1"));
  EXPECT_TRUE(p.Find("gateway.gw@dgx2")->reasons.empty());
  // The gate travels in a saved plan.
  Result<Plan> back = Plan::FromJson(p.ToJson());
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->Find("deployment.lab@dgx1")->gate, d.gate);
}

TEST(GatePlanTest, NoFreeNodeWithTheImageIsInPlace) {
  Plan p = ImageChange();
  p.changes[1].action = Action::kDelete;  // v2 leaves dgx3
  MarkGatedChanges(Lab(), {}, false, &p);
  const PlanChange& d = *p.Find("deployment.lab@dgx1");
  ASSERT_TRUE(d.gate.has_value());
  EXPECT_EQ(d.gate->candidate, "");
  EXPECT_NE(d.summary.find("gated: in place"), std::string::npos);
  EXPECT_FALSE(p.Find("gateway.gw@dgx2")->reasons.empty());  // 503 meanwhile: so it is
}

TEST(GatePlanTest, OnlyImageModelOrRecipeChangesAreGated) {
  Plan p = ImageChange();
  PlanChange& d = p.changes[4];
  d.before = Want("r/v2@sha256:2", "spec1");  // same image and recipe: replaced for health
  MarkGatedChanges(Lab(), {}, false, &p);
  EXPECT_FALSE(p.Find("deployment.lab@dgx1")->gate.has_value());
  Manifest no_promote = Lab();
  no_promote.deployments["lab"].promote.reset();
  Plan q = ImageChange();
  MarkGatedChanges(no_promote, {}, false, &q);
  EXPECT_FALSE(q.Find("deployment.lab@dgx1")->gate.has_value());
}

TEST(GatePlanTest, ARefusedSpecIsHeldUntilRetried) {
  const std::vector<nlohmann::json> events = {{{"time", "t1"},
                                               {"event", "gate"},
                                               {"deployment", "lab"},
                                               {"outcome", "refused"},
                                               {"spec", "spec2"},
                                               {"run", "r1"}},
                                              {{"time", "t2"},
                                               {"event", "gate"},
                                               {"deployment", "lab"},
                                               {"outcome", "refused"},
                                               {"spec", "spec3"},
                                               {"run", "r2"}}};
  Plan p = ImageChange();
  MarkGatedChanges(Lab(), LastGateOutcomes(events), false, &p);
  const PlanChange& d = *p.Find("deployment.lab@dgx1");
  EXPECT_EQ(d.action, Action::kNoop);
  EXPECT_FALSE(d.gate.has_value());
  ASSERT_EQ(p.warnings.size(), 1u);
  EXPECT_NE(p.warnings[0].find("held: the gate refused this spec"), std::string::npos);
  Plan retried = ImageChange();
  MarkGatedChanges(Lab(), LastGateOutcomes(events), true, &retried);
  EXPECT_TRUE(retried.Find("deployment.lab@dgx1")->gate.has_value());
  // Promoted since: not held.
  std::vector<nlohmann::json> later = events;
  later.push_back({{"time", "t3"},
                   {"event", "gate"},
                   {"deployment", "lab"},
                   {"outcome", "promoted"},
                   {"spec", "spec2"},
                   {"run", "r3"}});
  Plan promoted = ImageChange();
  MarkGatedChanges(Lab(), LastGateOutcomes(later), false, &promoted);
  EXPECT_EQ(promoted.Find("deployment.lab@dgx1")->action, Action::kReplace);
}

TEST(GatePlanTest, ReplicasFollowTheFirstNodesGate) {
  Manifest m = Lab();
  m.deployments["lab"].nodes = {"dgx1", "dgx2"};
  m.gateways.clear();
  Plan p = ImageChange();
  PlanChange second = p.changes[4];
  second.address = "deployment.lab@dgx2";
  second.node = "dgx2";
  p.changes.push_back(second);
  MarkGatedChanges(m, {}, false, &p);
  EXPECT_TRUE(p.Find("deployment.lab@dgx1")->gate.has_value());
  EXPECT_FALSE(p.Find("deployment.lab@dgx2")->gate.has_value());
  EXPECT_TRUE(DependsOn(*p.Find("deployment.lab@dgx2"), "deployment.lab@dgx1"));
}

TEST(GatePlanTest, AGroupIsNotGatedWithAWarning) {
  Manifest m = Lab();
  m.deployments["lab"].recipe.args = {"engine", "--rank", "{rank}"};
  Plan p = ImageChange();
  MarkGatedChanges(m, {}, false, &p);
  EXPECT_FALSE(p.Find("deployment.lab@dgx1")->gate.has_value());
  ASSERT_EQ(p.warnings.size(), 1u);
  EXPECT_NE(p.warnings[0].find("not gated"), std::string::npos);
}

}  // namespace
}  // namespace fleet
