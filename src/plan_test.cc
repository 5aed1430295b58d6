#include "src/plan.h"

#include <gtest/gtest.h>

#include "src/resource.h"

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

// An address names its resource back (heal, watch metrics and endpoints
// read deployment names from the state's addresses).
TEST(ResourceAddressTest, NameIsTheInverseOfTheAddress) {
  EXPECT_EQ(ResourceName("deployment", ResourceAddress("deployment", "q-2", "dgx1")), "q-2");
  EXPECT_EQ(ResourceName("deployment", "image.q@dgx1"), "");
  EXPECT_EQ(ResourceName("deployment", "deployment.q"), "");
  EXPECT_EQ(ResourceName("display_ram", "display_ram.dgx1"), "");
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

// The errors go in twice: "errors" as the lines shown (what readers of the
// JSON had before), "diagnostics" as the structs, which FromJson reads back.
TEST(PlanTest, ErrorsRoundTripAsDiagnostics) {
  Plan p = SamplePlan();
  EXPECT_FALSE(p.ToJson().contains("diagnostics"));  // none: the JSON as before
  p.errors = {{"node.dgx1", "node dgx1: hostname is dgx9", "is the address another box?"},
              {"", "dependency cycle between resources", ""}};
  const nlohmann::json j = p.ToJson();
  EXPECT_EQ(j["errors"],
            nlohmann::json({"node dgx1: hostname is dgx9 (is the address another box?)",
                            "dependency cycle between resources"}));
  EXPECT_EQ(j["diagnostics"][0]["address"], "node.dgx1");
  EXPECT_EQ(j["diagnostics"][0]["detail"], "is the address another box?");
  Result<Plan> back = Plan::FromJson(j);
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->errors, p.errors);
  // A plan saved before: its lines are summaries about no known address.
  nlohmann::json old = j;
  old.erase("diagnostics");
  back = Plan::FromJson(old);
  ASSERT_TRUE(back.ok()) << back.status().message();
  ASSERT_EQ(back->errors.size(), 2u);
  EXPECT_EQ(back->errors[0],
            (PlanDiagnostic{"", "node dgx1: hostname is dgx9 (is the address another box?)", ""}));
  // A diagnostic without its summary is a malformed plan, not a crash.
  old["diagnostics"] = {{{"address", "x"}}};
  EXPECT_FALSE(Plan::FromJson(old).ok());
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

// The plan fuzzer's finding: a serial too large for 64 bits parses as a
// double, and converting it was undefined behaviour (UBSan: "4.77778e+62 is
// outside the range of representable values of type 'unsigned long'").
TEST(PlanTest, RejectsASerialThatIsNotANonNegativeInteger) {
  for (const char* serial : {"477777777777777777777777777777777777777777777777777777777777777",
                             "-1", "7.5", "7.0", "\"7\"", "null"}) {
    nlohmann::json j = SamplePlan().ToJson();
    j["serial"] = nlohmann::json::parse(serial);
    Result<Plan> r = Plan::FromJson(j);
    ASSERT_FALSE(r.ok()) << serial;
    EXPECT_NE(r.status().message().find("serial"), std::string::npos) << r.status().message();
  }
  nlohmann::json j = SamplePlan().ToJson();
  j["serial"] = nlohmann::json::parse("18446744073709551615");
  Result<Plan> r = Plan::FromJson(j);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->serial, 18446744073709551615u);
}

}  // namespace
}  // namespace fleet
