// The named decisions of ModelProvider::Diff and steps of its Apply, each
// on its own (model_provider_test covers them together).
#include "providers/model/model_diff.h"

#include <gtest/gtest.h>

#include "providers/model/model_apply.h"
#include "state/state.h"

namespace fleet {
namespace {

using Json = nlohmann::json;

const std::string kRev = "0123456789abcdef0123456789abcdef01234567";

struct Case {
  DesiredResource desired;
  NodeFacts facts;
  std::map<std::string, ActualResource> actual;
  DiffContext ctx{facts, nullptr, &actual, nullptr};

  explicit Case(ModelWant w) {
    desired.address = "model.qwen@dgx2";
    desired.type = "model";
    desired.name = "qwen";
    desired.node = "dgx2";
    desired.attributes = w;
    facts.reachable = true;
  }
  ModelDiffInput In(const ResourceRecord* rec = nullptr) {
    return ModelDiffInputFor(desired, rec, ctx);
  }
};

ModelWant Pinned() {
  ModelWant w;
  w.repo = "org/qwen";
  w.revision = kRev;
  w.store = "local";
  w.source = "node:dgx5";
  w.location = "dgx2";
  w.cache = "/srv/hf/hub";
  w.source_kind = "node";
  w.source_name = "dgx5";
  w.source_address = "model.qwen@dgx5";
  w.source_node = "dgx5";
  w.source_cache = "/srv/hf/hub";
  return w;
}

ResourceRecord Recorded(const ModelWant& w) {
  ResourceRecord r;
  r.address = "model.qwen@dgx2";
  ModelRecord m;
  m.repo = w.repo;
  m.revision = w.revision;
  m.cache = w.cache;
  m.files = Listing{{"config.json", 100, std::string(40, 'c')}};
  m.verified = "headers";
  r.attributes = m;
  return r;
}

TEST(ModelDiff, UnsafeBranchNameIsRefused) {
  ModelWant w = Pinned();
  w.branch = "../main";
  Case c(w);
  std::optional<PlanChange> p = UnsafeBranchName(c.In());
  ASSERT_TRUE(p.has_value());
  EXPECT_NE(p->error.find("is not a branch name"), std::string::npos);
  c.desired.attributes = Pinned();
  EXPECT_FALSE(UnsafeBranchName(c.In()).has_value());
}

TEST(ModelDiff, NodeIsOffKeepsWhatIsRecorded) {
  Case c(Pinned());
  c.facts.reachable = false;
  ActualResource unread;
  std::optional<PlanChange> p = NodeIsOff(c.In(), unread);
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->action, Action::kCreate);
  EXPECT_EQ(p->detail["op"], "ensure");
  const ResourceRecord rec = Recorded(Pinned());
  p = NodeIsOff(c.In(&rec), unread);
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->action, Action::kNoop);
  EXPECT_EQ(p->summary, "node is off: not checked");
  EXPECT_FALSE(p->detail.contains("op"));
  c.facts.reachable = true;
  EXPECT_FALSE(NodeIsOff(c.In(), unread).has_value());
  std::optional<PlanChange> failed = ProbeFailed(c.In(), unread);
  ASSERT_TRUE(failed.has_value());
  EXPECT_EQ(failed->error, "model.qwen@dgx2: the probe printed nothing for it on dgx2");
}

TEST(ModelDiff, ReferenceFromTheRecordFirst) {
  Case c(Pinned());
  const ResourceRecord rec = Recorded(Pinned());
  ModelReference r = ChooseReference(c.In(&rec), kRev);
  EXPECT_TRUE(r.have);
  EXPECT_TRUE(r.from_record);
  EXPECT_EQ(r.from, "the state");
  EXPECT_FALSE(r.source_ok);  // the source was not probed
  r = ChooseReference(c.In(), kRev);
  EXPECT_FALSE(r.have);
}

TEST(ModelDiff, CompleteAndRecordedIsANoopWithoutFixes) {
  Case c(Pinned());
  const ResourceRecord rec = Recorded(Pinned());
  const ModelDiffInput in = c.In(&rec);
  ModelAssessment as;
  as.comp.complete = true;
  as.ref = ChooseReference(in, kRev);
  as.total = 100;
  std::optional<PlanChange> p = CompleteAndRecorded(as, in.base);
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->action, Action::kNoop);
  EXPECT_EQ(p->summary, "complete: 1 files, 100 B");
  as.fixes = {"make 1 absolute symlink(s) relative"};
  p = CompleteAndRecorded(as, in.base);
  EXPECT_EQ(p->action, Action::kUpdate);
  EXPECT_EQ(p->detail["op"], "fix");
  as.comp.complete = false;
  EXPECT_FALSE(CompleteAndRecorded(as, in.base).has_value());
  EXPECT_FALSE(CompleteNotRecorded(as, in.base).has_value());
}

TEST(ModelApply, CopyPlanLinksBlobsHereAndRefusesEscapingPaths) {
  HubProbe target;
  const Listing ref = {{"a.safetensors", 10, std::string(64, 'a')},
                       {"b.safetensors", 20, std::string(64, 'b')}};
  Result<ModelCopyPlan> plan = PlanModelCopy(ref, target, {{std::string(64, 'a'), 10}}, "dgx5");
  ASSERT_TRUE(plan.ok());
  ASSERT_EQ(plan->items.size(), 1u);
  EXPECT_EQ(plan->items[0].path, "b.safetensors");
  EXPECT_EQ(plan->bytes, 20u);
  EXPECT_NE(plan->links.find("a.safetensors"), std::string::npos);
  Result<ModelCopyPlan> bad = PlanModelCopy({{"../x", 1, ""}}, target, {}, "dgx5");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "source dgx5: refusing the snapshot path '../x'");
}

TEST(ModelApply, CopiesOnTheNodeThatSeesBoth) {
  Manifest m;
  for (const char* n : {"dgx1", "dgx2", "dgx3"}) m.nodes[n].name = n;
  m.stores["nas"] = StoreSpec{"nas", "/mnt/nas/hub", {"dgx1", "dgx2"}, {}};
  ModelWant w = Pinned();
  w.source_kind = "store";
  w.source_name = "nas";
  EXPECT_EQ(NodeSeeingBoth(m, w, "dgx2", "dgx2"), "dgx2");  // mounts the store
  EXPECT_EQ(NodeSeeingBoth(m, w, "dgx3", "dgx3"), "");      // through the controller
  w.source_kind = "node";
  w.source_name = "dgx5";
  EXPECT_EQ(NodeSeeingBoth(m, w, "dgx2", "dgx2"), "");
}

}  // namespace
}  // namespace fleet
