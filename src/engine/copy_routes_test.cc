// CopyRouteLines, and the plan's text and Markdown that show them.
#include "src/engine/copy_routes.h"

#include <gtest/gtest.h>

#include "src/engine/copy_chains.h"
#include "src/engine/plan_sources.h"
#include "src/engine/render.h"

namespace fleet {
namespace {

CopyRoute Fabric(const std::string& what, const std::string& from, const std::string& to) {
  return CopyRoute{what, from, to, true, "10.77.0.0/24", ""};
}
CopyRoute Controller(const std::string& what, const std::string& from, const std::string& to,
                     const std::string& why) {
  return CopyRoute{what, from, to, false, "", why};
}
PlanChange Copying(const std::string& address, const CopyRoute& route) {
  PlanChange c;
  c.address = address;
  c.type = address.substr(0, address.find('.'));
  c.node = route.to;
  c.action = Action::kCreate;
  c.summary = "copy from " + route.from;
  c.copy = route;
  return c;
}

// The issue's lab: an image from dgx4 to dgx1..dgx3 over the fabric and to
// dgx5 through the controller, a model from dgx5 to dgx1.
Plan LabPlan() {
  Plan p;
  p.lineage = "l";
  for (const char* n : {"dgx1", "dgx2", "dgx3"})
    p.changes.push_back(Copying(std::string("image.b12x@") + n, Fabric("image b12x", "dgx4", n)));
  p.changes.push_back(Copying("image.b12x@dgx5",
                              Controller("image b12x", "dgx4", "dgx5", "no common fabric subnet")));
  p.changes.push_back(Copying("model.qwen38@dgx1", Fabric("model qwen38", "dgx5", "dgx1")));
  return p;
}

TEST(CopyRoutes, CombinesTheCopiesOfOneThingFromOneSourcePerRoute) {
  EXPECT_EQ(CopyRouteLines(LabPlan()),
            (std::vector<std::string>{
                "image b12x: dgx4 \u2192 dgx1, dgx2, dgx3 over fabric 10.77.0.0/24",
                "image b12x: dgx4 \u2192 dgx5 through the controller (no common fabric subnet)",
                "model qwen38: dgx5 \u2192 dgx1 over fabric 10.77.0.0/24"}));
}

TEST(CopyRoutes, SplitsBySourceReasonAndSubnetAndLeavesOutWhatWillNotRun) {
  Plan p;
  p.changes.push_back(Copying("image.i@a", Fabric("image i", "s1", "a")));
  p.changes.push_back(Copying("image.i@b", Fabric("image i", "s2", "b")));  // another source
  CopyRoute other = Fabric("image i", "s1", "c");
  other.fabric = "10.88.0.0/24";
  p.changes.push_back(Copying("image.i@c", other));
  p.changes.push_back(Copying("image.i@d", Controller("image i", "s1", "d", "FLEET_FABRIC=off")));
  p.changes.push_back(
      Copying("image.i@e", Controller("image i", "s1", "e", "no fabric address on the target")));
  p.changes.push_back(Copying("image.i@f", Controller("image i", "s1", "f", "FLEET_FABRIC=off")));
  PlanChange noop = Copying("image.i@g", Fabric("image i", "s1", "g"));
  noop.action = Action::kNoop;
  p.changes.push_back(noop);
  PlanChange failed = Copying("image.i@h", Fabric("image i", "s1", "h"));
  failed.error = "cannot plan";
  p.changes.push_back(failed);
  p.changes.push_back(Copying("image.i@a2", Fabric("image i", "s1", "a2")));
  EXPECT_EQ(CopyRouteLines(p),
            (std::vector<std::string>{
                "image i: s1 \u2192 a, a2 over fabric 10.77.0.0/24",
                "image i: s2 \u2192 b over fabric 10.77.0.0/24",
                "image i: s1 \u2192 c over fabric 10.88.0.0/24",
                "image i: s1 \u2192 d, f through the controller (FLEET_FABRIC=off)",
                "image i: s1 \u2192 e through the controller (no fabric address on the target)"}));
  EXPECT_TRUE(CopyRouteLines(Plan{}).empty());
}

TEST(CopyRoutes, ThePlanShowsThemAfterTheChanges) {
  const std::string out = RenderPlan(LabPlan(), {});
  const size_t head = out.find("Copies between nodes, per source:\n");
  ASSERT_NE(head, std::string::npos) << out;
  EXPECT_GT(head, out.find("image.b12x@dgx5"));
  EXPECT_LT(head, out.find("Plan: "));
  EXPECT_NE(out.find("\n  image b12x: dgx4 \u2192 dgx1, dgx2, dgx3 over fabric 10.77.0.0/24\n"),
            std::string::npos)
      << out;
  // A plan without copies says nothing of them.
  Plan none = LabPlan();
  for (PlanChange& c : none.changes) c.copy.reset();
  EXPECT_EQ(RenderPlan(none, {}).find("Copies between nodes"), std::string::npos);
}

TEST(CopyRoutes, TheMarkdownSummaryListsThem) {
  Plan p = LabPlan();
  p.changes.push_back(Copying("image.x@n`1", Controller("image x", "s|1", "n`1", "why`|")));
  const std::string md = RenderPlanMarkdown(p);
  EXPECT_NE(md.find("#### Copies between nodes, per source\n\n"
                    "- `image b12x: dgx4 \u2192 dgx1, dgx2, dgx3 over fabric 10.77.0.0/24`\n"),
            std::string::npos)
      << md;
  // A backtick a name or reason holds cannot end the code span.
  EXPECT_NE(md.find("- `image x: s|1 \u2192 n'1 through the controller (why'|)`\n"),
            std::string::npos)
      << md;
}

// The plan's JSON carries each copy's route (additively: a change that
// copies nothing has no "copy"), and a saved plan shows the same lines.
TEST(CopyRoutes, SurviveThePlansJson) {
  Plan p = LabPlan();
  PlanChange plain;
  plain.address = "node.dgx1";
  plain.type = "node";
  p.changes.push_back(plain);
  const nlohmann::json j = p.ToJson();
  EXPECT_EQ(j["changes"][0]["copy"], (nlohmann::json{{"what", "image b12x"},
                                                     {"from", "dgx4"},
                                                     {"to", "dgx1"},
                                                     {"direct", true},
                                                     {"fabric", "10.77.0.0/24"}}));
  EXPECT_EQ(j["changes"][3]["copy"]["why_not"], "no common fabric subnet");
  EXPECT_FALSE(j["changes"][5].contains("copy"));
  Result<Plan> back = Plan::FromJson(j);
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->changes[3].copy, p.changes[3].copy);
  EXPECT_EQ(CopyRouteLines(*back), CopyRouteLines(p));
  nlohmann::json bad = j;
  bad["changes"][0]["copy"]["direct"] = "yes";
  Result<Plan> refused = Plan::FromJson(bad);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("image.b12x@dgx1"), std::string::npos);
}

CopyRoute WithAddress(CopyRoute r, const std::string& address) {
  r.to_address = address;
  return r;
}

// The lab's fan-out dgx4 -> dgx1..dgx3 becomes one chain, in the plan's
// order, carried by each of its changes; what is no fan-out stays alone.
TEST(CopyChains, AFanOutOverOneFabricBecomesOneChain) {
  Plan p;
  for (const char* n : {"dgx1", "dgx2", "dgx3"})
    p.changes.push_back(
        Copying(std::string("image.b12x@") + n,
                WithAddress(Fabric("image b12x", "dgx4", n), std::string("10.77.0.1") + n[3])));
  p.changes.push_back(Copying("image.b12x@dgx5",
                              Controller("image b12x", "dgx4", "dgx5", "no common fabric subnet")));
  p.changes.push_back(
      Copying("model.q@dgx1", WithAddress(Fabric("model q", "dgx5", "dgx1"), "10.77.0.11")));
  ChainFanOuts(&p.changes, true);
  const std::vector<CopyRoute::Hop> chain = {
      {"dgx1", "10.77.0.11"}, {"dgx2", "10.77.0.12"}, {"dgx3", "10.77.0.13"}};
  for (int i = 0; i < 3; ++i) EXPECT_EQ(p.changes[i].copy->chain, chain);
  EXPECT_TRUE(p.changes[3].copy->chain.empty());
  EXPECT_TRUE(p.changes[4].copy->chain.empty());
  EXPECT_EQ(p.changes[0].copy->ChainKey(), p.changes[2].copy->ChainKey());
  EXPECT_EQ(CopyRouteLines(p)[0],
            "image b12x: dgx4 \u2192 dgx1 \u2192 dgx2 \u2192 dgx3 over fabric 10.77.0.0/24 (one "
            "chain: each byte leaves dgx4 once)");
  // The chain survives the plan's JSON (a saved plan applies it alike).
  Result<Plan> back = Plan::FromJson(p.ToJson());
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->changes[1].copy->chain, chain);
  // FLEET_FABRIC_CHAIN=off: a copy per target, as before.
  ChainFanOuts(&p.changes, false);
  EXPECT_TRUE(p.changes[0].copy->chain.empty());
  EXPECT_EQ(CopyRouteLines(p)[0],
            "image b12x: dgx4 \u2192 dgx1, dgx2, dgx3 over fabric 10.77.0.0/24");
}

TEST(CopyChains, ANoopOrAFailedChangeOrNoAddressIsNoHop) {
  Plan p;
  p.changes.push_back(Copying("image.i@a", WithAddress(Fabric("image i", "s", "a"), "10.0.0.1")));
  PlanChange noop = Copying("image.i@b", WithAddress(Fabric("image i", "s", "b"), "10.0.0.2"));
  noop.action = Action::kNoop;
  p.changes.push_back(noop);
  PlanChange failed = Copying("image.i@c", WithAddress(Fabric("image i", "s", "c"), "10.0.0.3"));
  failed.error = "cannot plan";
  p.changes.push_back(failed);
  p.changes.push_back(Copying("image.i@d", Fabric("image i", "s", "d")));  // no address
  ChainFanOuts(&p.changes, true);
  for (const PlanChange& c : p.changes) EXPECT_TRUE(c.copy->chain.empty()) << c.address;
}

}  // namespace
}  // namespace fleet
