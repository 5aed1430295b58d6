// The named decisions of ModelProvider::Diff and steps of its Apply, each
// on its own (model_provider_test covers them together).
#include "providers/model/model_diff.h"

#include <gtest/gtest.h>

#include "providers/model/hub_download.h"
#include "providers/model/model_apply.h"
#include "src/hub_api.h"
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

// The Hub as a diff sees it: a listing, no answer, or a refusal.
class FakeHub : public HubApi {
 public:
  Result<HubListing> answer = HubListing{};
  int asked = 0;
  Result<HubListing> ListFiles(const std::string&, const std::string&) override {
    ++asked;
    return answer;
  }
  std::string Endpoint() const override { return "http://hub.test"; }
};

ModelWant FromTheHub() {
  ModelWant w = Pinned();
  w.source = "hub";
  w.source_kind = "hub";
  w.source_name = "hub";
  w.source_address.clear();
  w.source_node.clear();
  w.source_cache.clear();
  return w;
}

// The log's EXL3 download: 636 GB listed by the Hub, 251 GB free on dgx5.
HubListing Huge() {
  HubListing l;
  for (int i = 0; i < 120; ++i)
    l.files.push_back(HubFile{"model-" + std::to_string(1000 + i) + ".safetensors", 5300000000,
                              std::string(64, 'a')});
  return l;
}

ModelAssessment NothingThere(const ModelDiffInput& in, uint64_t free_bytes) {
  HubProbe p;
  p.disk.known = true;
  p.disk.path = "/srv/hf/hub";
  p.disk.mount = "/srv/hf";
  p.disk.avail_bytes = free_bytes;
  return Assess(in, p, {});
}

TEST(ModelDiff, TheHubsSizesRefuseADownloadThatCannotFit) {
  Case c(FromTheHub());
  FakeHub hub;
  hub.answer = Huge();
  c.ctx.hub = &hub;
  const ModelDiffInput in = c.In();
  PlanChange p = Stage(in, NothingThere(in, 251000000000), in.base);
  EXPECT_EQ(p.error,
            "model.qwen@dgx2: needs 636 GB (sizes from the Hub's listing: 120 files, 636 GB), "
            "dgx2 has 251 GB free at /srv/hf/hub (filesystem /srv/hf); no store dgx2 mounts has "
            "room either");
  p = Stage(in, NothingThere(in, 1200000000000), in.base);
  EXPECT_EQ(p.error, "");
  EXPECT_NE(p.summary.find("from the hub on dgx2 (636 GB)"), std::string::npos) << p.summary;
}

TEST(ModelDiff, AHubThatDoesNotAnswerIsSaidAndLeftToApply) {
  Case c(FromTheHub());
  FakeHub hub;
  hub.answer = Result<HubListing>(Status::Unreachable("the Hub at http://hub.test: no answer"));
  c.ctx.hub = &hub;
  const ModelDiffInput in = c.In();
  PlanChange p = Stage(in, NothingThere(in, 251000000000), in.base);
  EXPECT_EQ(p.error, "");
  ASSERT_FALSE(p.reasons.empty());
  EXPECT_EQ(p.reasons.back(),
            "size unknown: the Hub at http://hub.test: no answer; apply asks the Hub again "
            "before the download; 251 GB free at /srv/hf/hub");
  // Its refusal (a gated repo without a token) is the plan's error.
  hub.answer = Result<HubListing>::Error("the Hub at http://hub.test: org/qwen@x: HTTP 401");
  p = Stage(in, NothingThere(in, 251000000000), in.base);
  EXPECT_EQ(p.error, "model.qwen@dgx2: the Hub at http://hub.test: org/qwen@x: HTTP 401");
  // Not from the hub, or no Hub to ask: not asked.
  const int asked = hub.asked;
  Case peer(Pinned());
  peer.ctx.hub = &hub;
  const ModelDiffInput pin = peer.In();
  Stage(pin, NothingThere(pin, 1), pin.base);
  EXPECT_EQ(hub.asked, asked);
  c.ctx.hub = nullptr;
  const ModelDiffInput none = c.In();
  p = Stage(none, NothingThere(none, 251000000000), none.base);
  EXPECT_EQ(p.reasons.back(),
            "size unknown until the download lists it; 251 GB free at /srv/hf/hub");
}

// The token reaches the node's download on standard input only.
TEST(ModelApply, TheDownloadsTokenIsNeverOnItsCommandLine) {
  HubDownloadEnv env{"", "http://127.0.0.1:1234", "hf_SecretTokenValue123"};
  const HubLocation loc{"~/hf/hub", "org/qwen", kRev};
  const std::string cmd = DownloadScript(DefaultDownloadCommand(), loc, env);
  EXPECT_EQ(cmd.find("hf_Secret"), std::string::npos);
  EXPECT_NE(cmd.find("http://127.0.0.1:1234 1 hf download --revision "), std::string::npos) << cmd;
  EXPECT_NE(cmd.find("fleet-hub-download \"$HOME\"/hf/hub models--org--qwen '' "),
            std::string::npos)
      << cmd;
  EXPECT_EQ(DownloadStdin(env), "hf_SecretTokenValue123\n");
  env.token.clear();
  env.cli = "/opt/hf bin/hf";
  EXPECT_EQ(DownloadStdin(env), "");
  EXPECT_NE(DownloadScript(DefaultDownloadCommand(), loc, env)
                .find("'/opt/hf bin/hf' http://127.0.0.1:1234 0 hf download"),
            std::string::npos);
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
  EXPECT_EQ(plan->links, (BlobLinks{{"a.safetensors", "../../blobs/" + std::string(64, 'a')}}));
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
