// The node provider's typed attributes keep the JSON keys the plan and the
// state have always had, and each of its plan decisions is reached.
#include "providers/node/node_json.h"

#include <gtest/gtest.h>

#include "providers/node/node_provider.h"
#include "src/fake_clock.h"
#include "src/power_switch.h"
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
    return NodeProvider().Diff(desired_, actual_, record, ctx);
  }
  PlanChange DiffDestroy() {
    desired_.attributes = want_;
    DiffContext ctx{facts_};
    return NodeProvider().DiffDestroy(desired_, actual_, nullptr, ctx);
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
  ActualResource actual_;
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

// The switch as the plan read it (NodeFacts::power_switch_*).
TEST_F(NodeDiffTest, AnUnknownOrUnavailableSwitchIsAPlanError) {
  want_.power_switch = "switch.n1x";
  facts_.power_switch_error =
      "power controller http://ha (switch.n1x): HTTP 404: the controller has no such entity";
  facts_.power_switch_refused = true;
  PlanChange c = Diff();  // converged otherwise: still an error
  EXPECT_EQ(c.error,
            "node n1: cannot read its power switch switch.n1x: power controller http://ha "
            "(switch.n1x): HTTP 404: the controller has no such entity");
  EXPECT_NE(DiffDestroy().error, "");

  facts_.power_switch_error.clear();
  facts_.power_switch_refused = false;
  facts_.power_switch_state = "unavailable";
  EXPECT_NE(Diff().error.find("node n1: its power switch switch.n1x is unusable: the controller "
                              "reads it 'unavailable'"),
            std::string::npos)
      << Diff().error;
}

// A controller that did not answer matters only to a plan that switches.
TEST_F(NodeDiffTest, AControllerAwayMattersOnlyWhenSwitching) {
  want_.power_switch = "switch.n1";
  facts_.power_switch_error = "power controller http://ha (switch.n1): ... Couldn't connect";
  EXPECT_EQ(Diff().error, "");
  EXPECT_NE(DiffDestroy().error.find("cannot read its power switch switch.n1"), std::string::npos);
  facts_.reachable = false;
  EXPECT_NE(Diff().error.find("cannot read its power switch"), std::string::npos);
}

// The log's copy-paste: switch.dgx3 on dgx4. A node that answers under a
// switch that reads off is fed by another switch.
TEST_F(NodeDiffTest, ASwitchReadingOffUnderALiveNodeIsAnotherNodes) {
  want_.power_switch = "switch.n3";
  facts_.power_switch_state = "off";
  EXPECT_EQ(Diff().error,
            "node n1 answers SSH, but its power switch switch.n3 reads off: is switch.n3 another "
            "node's switch? (check nodes.n1.power.switch)");
  facts_.power_switch_state = "on";
  EXPECT_EQ(Diff().error, "");
}

// SSH quiet, switch still on, node wanted off: switch it off.
TEST_F(NodeDiffTest, AQuietNodeWhoseSwitchIsOnIsSwitchedOff) {
  want_.power_switch = "switch.n1";
  want_.power = kPowerOff;
  facts_.reachable = false;
  facts_.power_switch_state = "on";
  PlanChange c = Diff();
  EXPECT_EQ(c.action, Action::kUpdate);
  EXPECT_EQ(c.detail, (Json{{"op", "power_off"}}));
  EXPECT_EQ(c.summary, "power off (SSH is quiet; switch switch.n1 still on)");
  EXPECT_EQ(DiffDestroy().detail, (Json{{"op", "power_off"}}));
  facts_.power_switch_state = "off";
  EXPECT_EQ(Diff().summary, "powered off, as declared");
  EXPECT_EQ(DiffDestroy().summary, "already off");
}

TEST(PoweroffSudoTest, ArgvOfPlainSudoCommandsOnly) {
  EXPECT_EQ(PoweroffSudoArgv("sudo -n systemctl poweroff"),
            (std::vector<std::string>{"systemctl", "poweroff"}));
  EXPECT_EQ(PoweroffSudoArgv("sudo /sbin/poweroff"), (std::vector<std::string>{"/sbin/poweroff"}));
  EXPECT_EQ(PoweroffSudoArgv("sudo -n -- /sbin/poweroff -f"),
            (std::vector<std::string>{"/sbin/poweroff", "-f"}));
  EXPECT_TRUE(PoweroffSudoArgv("systemctl poweroff").empty());       // no sudo: nothing to ask
  EXPECT_TRUE(PoweroffSudoArgv("sudo -u root poweroff").empty());    // an option with a value
  EXPECT_TRUE(PoweroffSudoArgv("sudo -n poweroff; true").empty());   // more than plain words
  EXPECT_TRUE(PoweroffSudoArgv("sudo -n \"$(poweroff)\"").empty());  // hostile input
  EXPECT_TRUE(PoweroffSudoScript({}).empty());
  // The embedded poweroff_sudo.sh, called with the words quoted once
  // (poweroff_sudo_test.cc runs it).
  const std::string script = PoweroffSudoScript({"systemctl", "power off"});
  EXPECT_NE(script.find("\npoweroff_sudo systemctl 'power off'\n"), std::string::npos) << script;
}

TEST_F(NodeDiffTest, APoweroffSudoRefusesIsAPlanErrorWithTheLine) {
  want_.power_switch = "switch.n1";
  actual_.attributes = Json::object();
  PutPoweroffSudo(actual_.attributes,
                  ParsePoweroffSudo("poweroff_sudo_user=kilork\n"
                                    "poweroff_sudo_command=/usr/bin/systemctl poweroff\n"
                                    "poweroff_sudo=refused\n"));
  const std::string want =
      "node n1: sudo on n1 asks kilork for a password for `sudo -n /usr/bin/systemctl poweroff` "
      "(fleet cannot answer one: the power off would fail after the serves stopped). Install "
      "this drop-in on n1 (`sudo visudo -f /etc/sudoers.d/fleet`), nothing broader:\n    "
      "kilork ALL=(root) NOPASSWD: /usr/bin/systemctl poweroff";
  EXPECT_EQ(DiffDestroy().error, want);
  EXPECT_EQ(Diff().error, "");  // this plan keeps it on
  want_.power = kPowerOff;
  EXPECT_EQ(Diff().error, want);
  // Allowed, or not asked: no error.
  PutPoweroffSudo(actual_.attributes,
                  ParsePoweroffSudo("poweroff_sudo_user=kilork\npoweroff_sudo=allowed\n"));
  EXPECT_EQ(Diff().error, "");
  actual_.attributes = Json::object();
  EXPECT_EQ(DiffDestroy().error, "");
}

// A power change is read back: a switch that does not follow fails now.
class FakeSwitch : public PowerSwitch {
 public:
  std::string state = "on";
  Result<std::string> GetState(const std::string&) override { return state; }
  Status TurnOn(const std::string&) override { return Status::OK(); }
  Status TurnOff(const std::string&) override { return Status::OK(); }
};

TEST(ConfirmSwitchedTest, AStuckSwitchFailsWithItsState) {
  FakeSwitch stuck;
  FakeClock clock;
  Status s = ConfirmSwitched(&stuck, "switch.n1", "off", &clock, 300, 50);
  EXPECT_FALSE(s.ok());
  EXPECT_GE(clock.Elapsed(), std::chrono::milliseconds(300));  // read for the whole bound
  EXPECT_EQ(s.message().rfind("switch switch.n1 did not follow turn_off: it still reads on ", 0),
            0u)
      << s.message();
  EXPECT_NE(s.message().find(" s later (a stuck relay, or an entity that is not the one feeding "
                             "this node)"),
            std::string::npos);
  stuck.state = "off";
  EXPECT_TRUE(ConfirmSwitched(&stuck, "switch.n1", "off", &clock, 300, 50).ok());
}

TEST(HomeAssistantAnswerTest, AnUnknownEntityIsSaidSo) {
  Result<Json> r = ReadHomeAssistantAnswer(404, "{\"message\": \"Entity not found.\"}",
                                           "GET /api/states/switch.x", "power controller u (x)");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("no such entity"), std::string::npos);
  EXPECT_FALSE(r.status().unreachable());
  EXPECT_TRUE(r.status().not_found());
  // Another refusal is no "not found".
  EXPECT_FALSE(
      ReadHomeAssistantAnswer(401, "", "GET /api/states/switch.x", "u").status().not_found());
}

}  // namespace
}  // namespace fleet
