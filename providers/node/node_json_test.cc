// The node provider's typed attributes keep the JSON keys the plan and the
// state have always had, and each of its plan decisions is reached.
#include "providers/node/node_json.h"

#include <gtest/gtest.h>

#include "providers/node/node_provider.h"
#include "state/state.h"

namespace fleet {
namespace {

using Json = nlohmann::json;

TEST(NodeJsonTest, WantWritesSwitchOnlyWhenDeclared) {
  NodeWant w{"dgx1", "10.0.0.1:22", "on", std::nullopt};
  EXPECT_EQ(Json(w), (Json{{"hostname", "dgx1"}, {"endpoint", "10.0.0.1:22"}, {"power", "on"}}));
  w.power_switch = "switch.dgx1";
  Json j = w;
  EXPECT_EQ(j.at("switch"), "switch.dgx1");
  EXPECT_EQ(Json(j.get<NodeWant>()), j);
}

TEST(NodeJsonTest, RecordWritesOnlyWhatIsSetAndReadsLeniently) {
  NodeRecord off;
  off.power = kPowerOff;
  EXPECT_EQ(Json(off), (Json{{"power", "off"}}));
  Json identity = {{"hostname", "h"}, {"machine_id", "m"}, {"arch", "x86_64"}, {"power", "on"}};
  EXPECT_EQ(Json(identity.get<NodeRecord>()), identity);
  // Not a string, or absent: unset (an older or hand-edited state still reads).
  NodeRecord odd = Json{{"hostname", 3}}.get<NodeRecord>();
  EXPECT_FALSE(odd.hostname.has_value());
  EXPECT_EQ(Json(Json::object().get<NodeRecord>()), Json::object());
}

TEST(NodeJsonTest, StepDefaultsToAdopt) {
  EXPECT_EQ(Json(NodeStep{kOpPowerOn}), (Json{{"op", "power_on"}}));
  EXPECT_EQ(Json::object().get<NodeStep>().op, kOpAdopt);
}

// Diff's decisions, one by one, through the provider.
class NodeDiffTest : public ::testing::Test {
 protected:
  NodeDiffTest() {
    desired_.address = "node.n1";
    desired_.type = "node";
    desired_.name = "n1";
    desired_.node = "n1";
    want_ = NodeWant{"n1-host", "127.0.0.1:22001", "on", std::nullopt};
    facts_.reachable = true;
    facts_.hostname = "n1-host";
    facts_.machine_id = "mid1";
    facts_.arch = "x86_64";
  }
  PlanChange Diff(const ResourceRecord* record = nullptr) {
    desired_.attributes = want_;
    DiffContext ctx{facts_};
    return NodeProvider().Diff(desired_, ActualResource{}, record, ctx);
  }
  PlanChange DiffDestroy() {
    desired_.attributes = want_;
    DiffContext ctx{facts_};
    return NodeProvider().DiffDestroy(desired_, ActualResource{}, nullptr, ctx);
  }
  ResourceRecord Recorded(const Json& attributes) {
    ResourceRecord r;
    r.address = "node.n1";
    r.type = "node";
    r.node = "n1";
    r.attributes = attributes;
    return r;
  }
  DesiredResource desired_;
  NodeWant want_;
  NodeFacts facts_;
};

TEST_F(NodeDiffTest, UnreachableAndDeclaredOffIsUnchanged) {
  facts_.reachable = false;
  want_.power = kPowerOff;
  PlanChange c = Diff();
  EXPECT_EQ(c.action, Action::kNoop);
  EXPECT_EQ(c.summary, "powered off, as declared");
}

TEST_F(NodeDiffTest, UnreachableWithoutSwitchIsAnError) {
  facts_.reachable = false;
  facts_.unreachable_reason = "connection refused";
  PlanChange c = Diff();
  EXPECT_NE(c.error.find("no power switch is declared"), std::string::npos) << c.error;
}

TEST_F(NodeDiffTest, UnreachableWithSwitchPowersOn) {
  facts_.reachable = false;
  want_.power_switch = "switch.n1";
  PlanChange c = Diff();
  EXPECT_EQ(c.action, Action::kCreate);
  EXPECT_EQ(c.summary, "power on (switch switch.n1)");
  EXPECT_EQ(c.detail, (Json{{"op", "power_on"}}));
  EXPECT_EQ(c.after, (Json{{"power", "on"}}));
}

TEST_F(NodeDiffTest, ReachableAndDeclaredOffPowersOff) {
  want_.power = kPowerOff;
  PlanChange c = Diff();
  EXPECT_EQ(c.action, Action::kUpdate);
  EXPECT_EQ(c.detail, (Json{{"op", "power_off"}}));
}

TEST_F(NodeDiffTest, WrongHostnameIsRefused) {
  facts_.hostname = "other-box";
  EXPECT_NE(Diff().error.find("says its hostname is 'other-box'"), std::string::npos);
}

TEST_F(NodeDiffTest, ChangedMachineIdIsRefused) {
  ResourceRecord r = Recorded({{"hostname", "n1-host"}, {"machine_id", "old"}, {"power", "on"}});
  EXPECT_NE(Diff(&r).error.find("machine id changed"), std::string::npos);
}

TEST_F(NodeDiffTest, AdoptsRecordsAndThenIsUnchanged) {
  PlanChange adopt = Diff();
  EXPECT_EQ(adopt.action, Action::kCreate);
  EXPECT_EQ(
      adopt.after,
      (Json{{"hostname", "n1-host"}, {"machine_id", "mid1"}, {"arch", "x86_64"}, {"power", "on"}}));
  ResourceRecord r = Recorded(adopt.after);
  EXPECT_EQ(Diff(&r).action, Action::kNoop);
  r.attributes["power"] = "off";
  EXPECT_EQ(Diff(&r).summary, "record node identity");
}

TEST_F(NodeDiffTest, DestroyPowersOffOnlyWithASwitch) {
  EXPECT_EQ(DiffDestroy().summary, "left on (no power switch declared)");
  want_.power_switch = "switch.n1";
  EXPECT_EQ(DiffDestroy().action, Action::kUpdate);
  facts_.reachable = false;
  EXPECT_EQ(DiffDestroy().summary, "already off");
}

}  // namespace
}  // namespace fleet
