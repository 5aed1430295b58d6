// The deployment diff's named decisions, each on its own: what it decides
// and when it lets the next one decide.
#include <gtest/gtest.h>

#include "providers/deployment/deployment_provider.h"
#include "providers/shared/display_ram_json.h"

namespace fleet {
namespace deployment_internal {
namespace {

class DeploymentDiffTest : public ::testing::Test {
 protected:
  DeploymentDiffTest() {
    want_.shown.container = "fleet-qwen";
    want_.shown.image = "r/i@sha256:" + std::string(64, 'a');
    want_.shown.port = 30000;
    want_.shown.health = "http://127.0.0.1:30000/v1/models";
    want_.shown.spec = std::string(64, 's');
    want_.cli = "podman";
    want_.health_timeout_s = 600;
    desired_.address = "deployment.qwen@dgx5";
    desired_.type = "deployment";
    desired_.name = "qwen";
    desired_.node = "dgx5";
    desired_.attributes = want_;
    base_ = ChangeFor(desired_);
    found_.exists = true;
    found_.state = "running";
    found_.spec = want_.shown.spec;
    found_.health = 200;
  }

  DeploymentDiffInput In() { return {desired_, want_, found_, record_, ctx_, base_}; }

  DeploymentWant want_;
  DesiredResource desired_;
  PlanChange base_;
  ContainerProbe found_;
  std::optional<DeploymentRecord> record_;
  NodeFacts facts_;
  std::vector<PlanChange> planned_;
  DiffContext ctx_{facts_, nullptr, nullptr, nullptr, false, &planned_};
};

TEST_F(DeploymentDiffTest, OtherSpecSaysWhatChangedAgainstTheRecord) {
  EXPECT_FALSE(OtherSpec(In()).has_value());
  DeploymentRecord running{want_, "cid", "iid"};
  running.want.shown.port = 29000;
  running.want.shown.spec = std::string(64, 'o');
  record_ = running;
  found_.spec = running.want.shown.spec;
  Decision d = OtherSpec(In());
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->action, Action::kReplace);
  EXPECT_EQ(d->reasons, std::vector<std::string>{"port: 29000 -> 30000"});
}

TEST_F(DeploymentDiffTest, NotRunningStartsIt) {
  EXPECT_FALSE(NotRunning(In()).has_value());
  found_.state = "exited";
  found_.exit_code = 137;
  Decision d = NotRunning(In());
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->action, Action::kUpdate);
  EXPECT_EQ(d->summary, "start fleet-qwen");
  EXPECT_EQ(d->reasons, std::vector<std::string>{"container is exited (exit code 137)"});
}

TEST_F(DeploymentDiffTest, StoppedForDisplayRamOnlyWhenTheReloadListsIt) {
  EXPECT_FALSE(StoppedForDisplayRam(In()).has_value());
  PlanChange reload;
  reload.address = "display_ram.dgx5";
  reload.action = Action::kUpdate;
  reload.detail = DisplayRamStep{kOpUnlock, std::nullopt, {"fleet-qwen"}};
  planned_.push_back(reload);
  Decision d = StoppedForDisplayRam(In());
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->summary, "start fleet-qwen again");
}

TEST_F(DeploymentDiffTest, UnhealthyIsReplacedOnlyPastTheTimeout) {
  EXPECT_EQ(UnhealthyOrStarting(In()).action, Action::kNoop);
  EXPECT_TRUE(UnhealthyOrStarting(In()).reasons.empty());
  found_.health = 503;
  found_.age_s = 60;
  PlanChange starting = UnhealthyOrStarting(In());
  EXPECT_EQ(starting.action, Action::kNoop);
  ASSERT_EQ(starting.reasons.size(), 1u);
  EXPECT_EQ(starting.reasons[0].rfind("starting: ", 0), 0u);
  found_.age_s = 601;
  EXPECT_EQ(UnhealthyOrStarting(In()).action, Action::kReplace);
}

TEST_F(DeploymentDiffTest, HealthUnreadableIsAPlanError) {
  EXPECT_FALSE(HealthUnreadable(In()).has_value());
  found_.health = -1;
  Decision d = HealthUnreadable(In());
  ASSERT_TRUE(d.has_value());
  EXPECT_NE(d->error.find("neither curl nor wget"), std::string::npos);
}

}  // namespace
}  // namespace deployment_internal
}  // namespace fleet
