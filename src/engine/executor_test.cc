// Executor logic (order, skipping, rollback, state writes) with a fake
// provider and the local transport: no SSH needed.
#include "src/engine/executor.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <mutex>

#include "tests/support/temp_dir.h"

namespace fleet {
namespace {

// Steps succeed unless detail.fail; undo is possible when detail.undoable.
class FakeProvider : public Provider {
 public:
  explicit FakeProvider(std::vector<std::string>* log, std::mutex* mu) : log_(log), mu_(mu) {}
  std::string type() const override { return "fake"; }
  std::vector<DesiredResource> Expand(const Manifest&) const override { return {}; }
  std::string ProbeScript(const DesiredResource&, const NodeSpec&) const override { return ""; }
  ActualResource ParseProbe(const DesiredResource&, const std::string&,
                            const NodeFacts&) const override {
    return {};
  }
  PlanChange Diff(const DesiredResource&, const ActualResource&, const ResourceRecord*,
                  const DiffContext&) const override {
    return {};
  }
  Result<nlohmann::json> Apply(const PlanChange& c, const StepContext& ctx) const override {
    // Touch the node for real, so a broken transport would show.
    auto r = ctx.transport->Run("echo ran");
    if (!r.ok() || r->out != "ran\n") return Result<nlohmann::json>::Error("transport broken");
    Add("apply " + c.address);
    if (c.detail.value("fail", false)) return Result<nlohmann::json>::Error("boom");
    if (c.detail.value("unreachable", false))
      return Status::Unreachable("cannot connect (timeout 10 s)");
    return nlohmann::json{{"applied", true}};
  }
  Status Undo(const PlanChange& c, const nlohmann::json&, const StepContext&,
              bool* undone) const override {
    Add("undo " + c.address);
    if (c.detail.value("undo_unreachable", false))
      return Status::Unreachable("cannot connect (timeout 10 s)");
    *undone = c.detail.value("undoable", false);
    return Status::OK();
  }

 private:
  void Add(const std::string& s) const {
    std::lock_guard<std::mutex> l(*mu_);
    log_->push_back(s);
  }
  std::vector<std::string>* log_;
  std::mutex* mu_;
};

class ExecutorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NE(dir_, "");
    for (const char* n : {"n1", "n2"}) {
      NodeSpec spec;
      spec.name = n;
      spec.address = "local";
      manifest_.nodes[n] = spec;
    }
    providers_.push_back(std::make_unique<FakeProvider>(&log_, &mu_));
    connections_ = std::make_unique<NodeConnections>(&manifest_);
    store_ = MakeLocalStateStore(dir_ + "/state.json");
    state_.lineage = "L";
  }

  static PlanChange Change(const std::string& addr, const std::string& node,
                           std::vector<std::string> deps, nlohmann::json detail = {}) {
    PlanChange c;
    c.address = addr;
    c.type = "fake";
    c.node = node;
    c.action = Action::kCreate;
    c.depends_on = std::move(deps);
    c.detail = detail.is_null() ? nlohmann::json::object() : detail;
    return c;
  }

  ApplyReport Run(const Plan& plan, bool rollback = true) {
    Executor ex(&manifest_, &providers_, connections_.get(), store_.get(), nullptr,
                [](const std::string&) {});
    ApplyOptions o;
    o.rollback = rollback;
    auto lock = store_->Lock("test");
    EXPECT_TRUE(lock.ok());
    return ex.Apply(plan, &state_, o);
  }

  const testing_support::TempDir tmp_{"fleet-executor"};
  const std::string dir_ = tmp_.path();
  Manifest manifest_;
  std::vector<std::unique_ptr<Provider>> providers_;
  std::unique_ptr<NodeConnections> connections_;
  std::unique_ptr<StateStore> store_;
  State state_;
  std::vector<std::string> log_;
  std::mutex mu_;
};

TEST_F(ExecutorTest, AppliesInDependencyOrderAndSavesState) {
  Plan p;
  p.changes = {Change("fake.b@n1", "n1", {"fake.a@n1"}), Change("fake.a@n1", "n1", {}),
               Change("fake.c@n2", "n2", {})};
  ApplyReport r = Run(p);
  EXPECT_TRUE(r.ok());
  EXPECT_EQ(r.done.size(), 3u);
  auto a = std::find(log_.begin(), log_.end(), "apply fake.a@n1");
  auto b = std::find(log_.begin(), log_.end(), "apply fake.b@n1");
  EXPECT_LT(a, b);
  auto loaded = store_->Load();
  ASSERT_TRUE(loaded.ok());
  EXPECT_EQ(loaded->serial, 1u);  // bumped once per apply, not per step
  EXPECT_EQ(loaded->resources.size(), 3u);
}

TEST_F(ExecutorTest, FailureSkipsDependentsAndRollsBackItsUnit) {
  Plan p;
  p.changes = {
      Change("fake.unlock@n1", "n1", {}, {{"undoable", true}}), Change("fake.stage@n1", "n1", {}),
      Change("fake.serve@n1", "n1", {"fake.unlock@n1", "fake.stage@n1"}, {{"fail", true}}),
      Change("fake.health@n1", "n1", {"fake.serve@n1"}), Change("fake.other@n2", "n2", {})};
  ApplyReport r = Run(p);
  EXPECT_FALSE(r.ok());
  ASSERT_EQ(r.failed.size(), 1u);
  EXPECT_NE(r.failed[0].find("fake.serve@n1: boom"), std::string::npos);
  EXPECT_EQ(r.skipped, std::vector<std::string>{"fake.health@n1"});
  EXPECT_EQ(r.undone, std::vector<std::string>{"fake.unlock@n1"});
  EXPECT_EQ(r.kept, std::vector<std::string>{"fake.stage@n1"});
  // The independent branch went on.
  EXPECT_NE(std::find(r.done.begin(), r.done.end(), "fake.other@n2"), r.done.end());
  auto loaded = store_->Load();
  ASSERT_TRUE(loaded.ok());
  EXPECT_EQ(loaded->Find("fake.unlock@n1"), nullptr);  // undone: record gone
  EXPECT_NE(loaded->Find("fake.stage@n1"), nullptr);   // kept: still recorded
  EXPECT_EQ(loaded->Find("fake.serve@n1"), nullptr);
}

// A node that could not be reached (powered off mid-apply) is not tried again
// by its later steps, each of which would wait out a connect timeout; other
// nodes go on, and a plain failure does not mark the node.
TEST_F(ExecutorTest, AnUnreachableNodeIsNotTriedAgainInTheSameApply) {
  Plan p;
  p.changes = {Change("fake.copy@n1", "n1", {}, {{"unreachable", true}}),
               Change("fake.stage@n1", "n1", {}), Change("fake.serve@n1", "n1", {}),
               Change("fake.fails@n2", "n2", {}, {{"fail", true}}),
               Change("fake.other@n2", "n2", {})};
  ApplyReport r = Run(p, /*rollback=*/false);
  EXPECT_FALSE(r.ok());
  ASSERT_EQ(r.failed.size(), 4u);
  for (const char* addr : {"fake.stage@n1", "fake.serve@n1"}) {
    auto f = std::find_if(r.failed.begin(), r.failed.end(),
                          [&](const std::string& m) { return m.rfind(addr, 0) == 0; });
    ASSERT_NE(f, r.failed.end()) << addr;
    EXPECT_NE(f->find("not tried: n1 could not be reached earlier in this apply (cannot connect"),
              std::string::npos)
        << *f;
    EXPECT_EQ(std::count(log_.begin(), log_.end(), std::string("apply ") + addr), 0) << addr;
  }
  EXPECT_EQ(std::count(log_.begin(), log_.end(), "apply fake.copy@n1"), 1);
  EXPECT_NE(std::find(r.done.begin(), r.done.end(), "fake.other@n2"), r.done.end());
}

// Rollback gives a node that went dark one more try (it may be back), and
// once an undo step cannot reach it, its other undo steps are not tried.
TEST_F(ExecutorTest, RollbackTriesADarkNodeOnceAndThenNoMore) {
  Plan p;
  nlohmann::json undo_unreachable = {{"undoable", true}, {"undo_unreachable", true}};
  p.changes = {
      Change("fake.unlock@n1", "n1", {}, undo_unreachable),
      Change("fake.limit@n1", "n1", {}, undo_unreachable),
      Change("fake.copy@n1", "n1", {"fake.unlock@n1", "fake.limit@n1"}, {{"unreachable", true}})};
  ApplyReport r = Run(p);
  EXPECT_FALSE(r.ok());
  // Undone newest first: the first undo is tried despite the copy's mark.
  EXPECT_EQ(std::count(log_.begin(), log_.end(), "undo fake.unlock@n1") +
                std::count(log_.begin(), log_.end(), "undo fake.limit@n1"),
            1);
  ASSERT_EQ(r.rollback_failed.size(), 2u);
  EXPECT_NE(r.rollback_failed[0].find("@n1: cannot connect"), std::string::npos)
      << r.rollback_failed[0];
  EXPECT_NE(r.rollback_failed[1].find("@n1: not tried: n1 could not be reached"), std::string::npos)
      << r.rollback_failed[1];
}

TEST_F(ExecutorTest, NoRollbackLeavesTheUnit) {
  Plan p;
  p.changes = {Change("fake.unlock@n1", "n1", {}, {{"undoable", true}}),
               Change("fake.serve@n1", "n1", {"fake.unlock@n1"}, {{"fail", true}})};
  ApplyReport r = Run(p, /*rollback=*/false);
  EXPECT_FALSE(r.ok());
  EXPECT_TRUE(r.undone.empty());
  EXPECT_EQ(std::count(log_.begin(), log_.end(), "undo fake.unlock@n1"), 0);
}

TEST_F(ExecutorTest, NoopPlanWritesNothing) {
  Plan p;
  PlanChange c = Change("fake.a@n1", "n1", {});
  c.action = Action::kNoop;
  p.changes = {c};
  ApplyReport r = Run(p);
  EXPECT_TRUE(r.ok());
  EXPECT_TRUE(log_.empty());
  EXPECT_EQ(access((dir_ + "/state.json").c_str(), F_OK), -1);
}

// The local store, but every save from the `fail_from`th on fails (the state
// database went away mid-apply).
class FailingStore : public StateStore {
 public:
  FailingStore(StateStore* inner, int fail_from) : inner_(inner), fail_from_(fail_from) {}
  Result<State> Load() override { return inner_->Load(); }
  Status Save(const State& s) override {
    if (++saves_ >= fail_from_) return Status::Error("connection lost");
    return inner_->Save(s);
  }
  Result<std::unique_ptr<StateLock>> Lock(const std::string& op) override {
    return inner_->Lock(op);
  }
  Status ForceUnlock(const std::string& id) override { return inner_->ForceUnlock(id); }
  std::string Describe() const override { return inner_->Describe(); }
  Result<std::vector<StateVersion>> History() override { return inner_->History(); }
  Result<State> LoadSerial(uint64_t serial) override { return inner_->LoadSerial(serial); }
  Status AppendEvent(const nlohmann::json& event) override { return inner_->AppendEvent(event); }
  Result<std::vector<nlohmann::json>> Events(const std::string& since) override {
    return inner_->Events(since);
  }
  Status AppendBenchRun(const nlohmann::json& run) override { return inner_->AppendBenchRun(run); }
  Result<std::vector<nlohmann::json>> BenchRuns(const std::string& deployment) override {
    return inner_->BenchRuns(deployment);
  }

 private:
  StateStore* inner_;
  int fail_from_;
  int saves_ = 0;
};

TEST_F(ExecutorTest, AnUnwritableStateStopsTheApply) {
  FailingStore failing(store_.get(), 1);
  Plan p;
  p.changes = {Change("fake.a@n1", "n1", {}), Change("fake.b@n2", "n2", {}),
               Change("fake.c@n1", "n1", {"fake.a@n1"})};
  std::vector<std::string> lines;
  Executor ex(&manifest_, &providers_, connections_.get(), &failing, nullptr,
              [&](const std::string& l) { lines.push_back(l); });
  ApplyOptions o;
  o.parallelism = 1;
  auto lock = failing.Lock("test");
  ASSERT_TRUE(lock.ok());
  ApplyReport r = ex.Apply(p, &state_, o);
  EXPECT_FALSE(r.ok());
  ASSERT_EQ(r.failed.size(), 1u);
  EXPECT_NE(r.failed[0].find("writing state after fake.a@n1: connection lost"), std::string::npos)
      << r.failed[0];
  EXPECT_EQ(r.skipped.size(), 2u);  // the dependent and the independent step
  EXPECT_EQ(std::count(log_.begin(), log_.end(), "apply fake.b@n2"), 0);
  bool said = false;
  for (const std::string& l : lines)
    said = said || l == "fake.b@n2: not started (the state cannot be written; apply stops)";
  EXPECT_TRUE(said);
}

}  // namespace
}  // namespace fleet
