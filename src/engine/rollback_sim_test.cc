// Rollback against a real simulated node: a step that depends on a display
// RAM unlock fails, and the unlock is undone on the node and in the state.
// (Until deployments exist, the failing dependent is a test provider; the
// display RAM provider, the planner, the executor and SSH are the real ones.)
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "src/engine/executor.h"
#include "src/engine/planner.h"
#include "src/shell_quote.h"

namespace fleet {
namespace {

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string s = ss.str();
  while (!s.empty() && s.back() == '\n') s.pop_back();
  return s;
}

// `serve.x@<node>`: needs the node's display RAM unlocked, and never comes up.
class NeverServes : public Provider {
 public:
  std::string type() const override { return "serve"; }
  std::vector<DesiredResource> Expand(const Manifest& m) const override {
    std::vector<DesiredResource> out;
    for (const auto& [name, spec] : m.nodes) {
      DesiredResource r;
      r.address = "serve.x@" + name;
      r.type = "serve";
      r.name = "x";
      r.node = name;
      r.depends_on = {"display_ram." + name};
      out.push_back(r);
    }
    return out;
  }
  std::string ProbeScript(const DesiredResource&, const NodeSpec&) const override { return ""; }
  ActualResource ParseProbe(const DesiredResource&, const std::string&,
                            const NodeFacts&) const override {
    return {};
  }
  PlanChange Diff(const DesiredResource& d, const ActualResource&, const ResourceRecord*,
                  const DiffContext&) const override {
    PlanChange c = ChangeFor(d);
    c.action = Action::kCreate;
    c.summary = "start serving";
    return c;
  }
  Result<nlohmann::json> Apply(const PlanChange&, const StepContext& ctx) const override {
    Result<CommandResult> r = ctx.transport->Run("echo 'health check timed out' >&2; exit 1");
    if (!r.ok()) return r.status();
    return Result<nlohmann::json>::Error("did not come up: " + r->err);
  }
};

class RollbackSimTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root (fleet-sim creates node users)";
    char tmpl[] = "/var/tmp/fleet-rollback-test.XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    const std::string root = FLEET_SOURCE_ROOT;
    ASSERT_EQ(std::system(ShellCommand({root + "/tests/sim/fleet-sim", "start", dir_ + "/sim",
                                        "--nodes", "1"})
                              .append(" >/dev/null")
                              .c_str()),
              0);
    started_ = true;
    ASSERT_EQ(std::system(ShellCommand({"python3", root + "/tests/integration/mkrepo.py", "--sim",
                                        dir_ + "/sim", "--out", dir_ + "/repo", "--unlock", "dgx1"})
                              .c_str()),
              0);
    Diagnostics diags;
    ASSERT_TRUE(LoadManifest(dir_ + "/repo", &manifest_, &diags));
    providers_ = MakeProviders();
    providers_.push_back(std::make_unique<NeverServes>());
    params_ = dir_ + "/sim/nodes/dgx1/root/sys/module/nvidia_drm/parameters";
  }
  void TearDown() override {
    if (started_)
      std::system(ShellCommand({std::string(FLEET_SOURCE_ROOT) + "/tests/sim/fleet-sim", "stop",
                                dir_ + "/sim", "--purge"})
                      .append(" >/dev/null 2>&1")
                      .c_str());
    if (!dir_.empty()) std::system(ShellCommand({"rm", "-rf", dir_}).c_str());
  }

  ApplyReport Apply(bool rollback, State* state) {
    NodeConnections connections(&manifest_);
    Planner planner(&manifest_, &providers_, &connections);
    auto store = MakeLocalStateStore(manifest_.state.path);
    auto lock = store->Lock("test");
    EXPECT_TRUE(lock.ok());
    Result<State> loaded = store->Load();
    EXPECT_TRUE(loaded.ok());
    Plan plan = planner.MakePlan(*loaded, {});
    EXPECT_TRUE(plan.errors.empty());
    EXPECT_NE(plan.Find("display_ram.dgx1"), nullptr);
    Executor executor(&manifest_, &providers_, &connections, store.get(), nullptr,
                      [](const std::string&) {});
    ApplyOptions options;
    options.rollback = rollback;
    ApplyReport report = executor.Apply(plan, &loaded.value(), options);
    *state = store->Load().value();
    return report;
  }

  std::string dir_;
  bool started_ = false;
  Manifest manifest_;
  std::vector<std::unique_ptr<Provider>> providers_;
  std::string params_;
};

TEST_F(RollbackSimTest, FailedDependentRestoresTheUnlockOnTheNodeAndInState) {
  State state;
  ApplyReport r = Apply(/*rollback=*/true, &state);
  ASSERT_EQ(r.failed.size(), 1u);
  EXPECT_NE(r.failed[0].find("serve.x@dgx1: did not come up: health check timed out"),
            std::string::npos);
  EXPECT_EQ(r.undone, std::vector<std::string>{"display_ram.dgx1"});
  EXPECT_TRUE(r.rollback_failed.empty());
  // The node is back at the values found before the unlock...
  EXPECT_EQ(Slurp(params_ + "/modeset"), "N");
  EXPECT_EQ(Slurp(params_ + "/fbdev"), "Y");
  // ...and the state says so: no unlock recorded; the node itself is kept.
  EXPECT_EQ(state.Find("display_ram.dgx1"), nullptr);
  EXPECT_NE(state.Find("node.dgx1"), nullptr);
}

TEST_F(RollbackSimTest, NoRollbackLeavesTheUnlockRecordedForALaterRestore) {
  State state;
  ApplyReport r = Apply(/*rollback=*/false, &state);
  ASSERT_EQ(r.failed.size(), 1u);
  EXPECT_TRUE(r.undone.empty());
  EXPECT_EQ(Slurp(params_ + "/modeset"), "Y");
  EXPECT_EQ(Slurp(params_ + "/fbdev"), "N");
  const ResourceRecord* rec = state.Find("display_ram.dgx1");
  ASSERT_NE(rec, nullptr);
  EXPECT_EQ(rec->attributes["original"]["modeset"], "N");
  EXPECT_EQ(rec->attributes["original"]["fbdev"], "Y");
}

}  // namespace
}  // namespace fleet
