#include "providers/model/model_provider.h"

#include <gtest/gtest.h>

#include "providers/model/completeness.h"
#include "providers/model/progress_meter.h"
#include "state/state.h"

namespace fleet {
namespace {

using Json = nlohmann::json;

const std::string kRev = "0123456789abcdef0123456789abcdef01234567";

Manifest Lab() {
  Manifest m;
  for (const char* n : {"dgx1", "dgx2", "dgx3", "dgx5"}) {
    NodeSpec s;
    s.name = n;
    s.address = "127.0.0.1";
    s.hf_cache = "/srv/hf/hub";
    m.nodes[n] = s;
  }
  m.nodes["dgx5"].hf_cache = "~/hf-local/hub";
  m.stores["nas"] = StoreSpec{"nas", "/mnt/nas/hub", {"dgx1", "dgx2"}, {}};
  ModelSpec q;
  q.name = "qwen";
  q.repo = "org/qwen";
  q.revision = kRev;
  q.store = "local";
  q.source = "node:dgx5";
  q.nodes = {"dgx3"};
  m.models["qwen"] = q;
  ModelSpec ds;
  ds.name = "ds";
  ds.repo = "org/ds";
  ds.revision = kRev;
  ds.store = "nas";
  ds.source = "hub";
  m.models["ds"] = ds;
  DeploymentSpec d;
  d.name = "qwen-serve";
  d.model = "qwen";
  d.nodes = {"dgx2"};
  m.deployments["qwen-serve"] = d;
  return m;
}

const DesiredResource* Find(const std::vector<DesiredResource>& v, const std::string& a) {
  for (const DesiredResource& r : v)
    if (r.address == a) return &r;
  return nullptr;
}

TEST(ModelProvider, ExpandScopesDeploymentsNodesAndSource) {
  ModelProvider p;
  Manifest m = Lab();
  std::vector<DesiredResource> d = p.Expand(m);
  ASSERT_EQ(d.size(), 4u);
  const DesiredResource* q2 = Find(d, "model.qwen@dgx2");
  const DesiredResource* q3 = Find(d, "model.qwen@dgx3");
  const DesiredResource* q5 = Find(d, "model.qwen@dgx5");
  const DesiredResource* ds = Find(d, "model.ds@nas");
  ASSERT_TRUE(q2 && q3 && q5 && ds);
  EXPECT_EQ(q2->depends_on, (std::vector<std::string>{"node.dgx2", "model.qwen@dgx5"}));
  EXPECT_EQ(q5->depends_on, (std::vector<std::string>{"node.dgx5"}));
  EXPECT_TRUE(q5->attributes["self_source"].get<bool>());
  EXPECT_EQ(q5->attributes["cache"], "~/hf-local/hub");
  EXPECT_EQ(q2->attributes["source_node"], "dgx5");
  EXPECT_EQ(q2->attributes["source_cache"], "~/hf-local/hub");
  // A store model lives once, probed through the store's first node.
  EXPECT_EQ(ds->node, "dgx1");
  EXPECT_EQ(ds->attributes["cache"], "/mnt/nas/hub");
  EXPECT_EQ(ds->attributes["location_kind"], "store");
  // dgx2 mounts nas: the probe reports its free space for "a store that fits".
  EXPECT_EQ(q2->attributes["mounted_stores"], Json::parse(R"([["nas", "/mnt/nas/hub"]])"));
  EXPECT_EQ(q3->attributes["mounted_stores"], Json::array());
  // The probe fragment quotes what it interpolates and lets the node expand ~.
  std::string script = p.ProbeScript(*q5, m.nodes["dgx5"]);
  EXPECT_NE(script.find("c=\"$HOME\"/hf-local/hub; d=models--org--qwen; r=" + kRev),
            std::string::npos);
}

TEST(ModelProvider, DeepVerifyFromManifestOrNow) {
  ModelProvider p;
  Manifest m = Lab();
  EXPECT_EQ(Find(p.Expand(m), "model.qwen@dgx2")->attributes["verify"], "sizes");
  m.models["qwen"].verify = "deep";  // `verify: deep` in fleet.yaml
  auto d = p.Expand(m);
  EXPECT_EQ(Find(d, "model.qwen@dgx2")->attributes["verify"], "deep");
  EXPECT_EQ(Find(d, "model.qwen@dgx2")->attributes["verify_forced"], false);
  m.models["qwen"].verify = "sizes";
  m.models["qwen"].verify_now = true;  // --verify=deep
  d = p.Expand(m);
  EXPECT_EQ(Find(d, "model.qwen@dgx2")->attributes["verify"], "deep");
  EXPECT_EQ(Find(d, "model.qwen@dgx2")->attributes["verify_forced"], true);
}

// A probe of a complete snapshot of the three-file model, `avail` bytes free.
HubProbe Probe(uint64_t avail = uint64_t{1} << 40) {
  HubProbe h;
  h.layout = "hub";
  h.snapshot = true;
  h.snapshots = {kRev};
  for (auto [path, size, blob] : std::vector<std::tuple<std::string, uint64_t, std::string>>{
           {"config.json", 100, std::string(40, 'c')},
           {"model-00001-of-00002.safetensors", 600'000'000'000, std::string(64, 'a')},
           {"model-00002-of-00002.safetensors", 36'000'000'000, std::string(64, 'b')}}) {
    SnapshotEntry e;
    e.path = path;
    e.link = LinkKind::kRelative;
    e.target = "../../blobs/" + blob;
    e.blob = blob;
    e.resolved = true;
    e.size = size;
    h.entries.push_back(e);
  }
  h.disk = {true, "/srv/hf/hub", "/srv", avail};
  return h;
}

HubProbe Empty(uint64_t avail) {
  HubProbe h;
  h.disk = {true, "/srv/hf/hub", "/srv", avail};
  return h;
}

ActualResource Actual(const HubProbe& h) {
  ActualResource a;
  a.probed = true;
  a.exists = h.snapshot;
  a.attributes = h.ToJson();
  return a;
}

struct Fixture {
  Manifest m = Lab();
  ModelProvider p;
  std::vector<DesiredResource> desired = p.Expand(m);
  std::map<std::string, NodeFacts> facts;
  std::map<std::string, ActualResource> actual;
  PlanChange Diff(const std::string& address, const ResourceRecord* rec = nullptr) {
    const DesiredResource* d = Find(desired, address);
    NodeFacts& f = facts[d->node];
    f.reachable = true;
    f.hostname = d->node;
    f.boot_id = "boot";
    DiffContext ctx{f, &facts, &actual, &m};
    return p.Diff(*d, actual[address], rec, ctx);
  }
};

ResourceRecord RecordOf(const std::string& address, const HubProbe& h) {
  ResourceRecord r;
  r.address = address;
  r.type = "model";
  r.attributes = {{"repo", "org/qwen"},
                  {"revision", kRev},
                  {"cache", "/srv/hf/hub"},
                  {"files", ListingToJson(ListingFromProbe(h))},
                  {"verified", "headers"}};
  return r;
}

TEST(ModelProvider, StagesFromThePeerThenConverges) {
  Fixture f;
  f.actual["model.qwen@dgx5"] = Actual(Probe());
  f.actual["model.qwen@dgx2"] = Actual(Empty(uint64_t{1} << 41));
  PlanChange c = f.Diff("model.qwen@dgx2");
  ASSERT_TRUE(c.error.empty()) << c.error;
  EXPECT_EQ(c.action, Action::kCreate);
  EXPECT_EQ(c.summary, "stage from dgx5: 3 file(s), 636 GB");
  EXPECT_EQ(c.detail["op"], "ensure");

  // Staged and recorded: nothing to do.
  f.actual["model.qwen@dgx2"] = Actual(Probe());
  ResourceRecord rec = RecordOf("model.qwen@dgx2", Probe());
  c = f.Diff("model.qwen@dgx2", &rec);
  EXPECT_EQ(c.action, Action::kNoop) << c.summary;
  EXPECT_TRUE(c.reasons.empty());

  // Truncated after that: the file is named.
  HubProbe cut = Probe();
  cut.entries[2].size = 1000;
  f.actual["model.qwen@dgx2"] = Actual(cut);
  c = f.Diff("model.qwen@dgx2", &rec);
  EXPECT_EQ(c.action, Action::kUpdate);
  ASSERT_FALSE(c.reasons.empty());
  EXPECT_EQ(c.reasons[0],
            "model-00002-of-00002.safetensors: 1000 bytes, expected 36000000000 (truncated)");
}

TEST(ModelProvider, RefusesAtPlanTimeWithoutTheSpace) {
  Fixture f;
  f.actual["model.qwen@dgx5"] = Actual(Probe());
  HubProbe small = Empty(251'000'000'000);
  small.stores["nas"] = {true, "", "/mnt/nas", 2'000'000'000'000};
  f.actual["model.qwen@dgx2"] = Actual(small);
  PlanChange c = f.Diff("model.qwen@dgx2");
  EXPECT_EQ(c.error,
            "model.qwen@dgx2: needs 636 GB, dgx2 has 251 GB free at /srv/hf/hub (filesystem "
            "/srv); a store that fits: nas (2.0 TB free)");
  f.actual["model.qwen@dgx3"] = Actual(Empty(251'000'000'000));
  c = f.Diff("model.qwen@dgx3");
  EXPECT_NE(c.error.find("no store dgx3 mounts has room either"), std::string::npos) << c.error;
}

TEST(ModelProvider, SourceOfItselfIsVerifiedNeverStaged) {
  Fixture f;
  f.actual["model.qwen@dgx5"] = Actual(Probe());
  PlanChange c = f.Diff("model.qwen@dgx5");
  EXPECT_EQ(c.action, Action::kUpdate);
  EXPECT_NE(c.summary.find("verify 3 files"), std::string::npos) << c.summary;
  HubProbe broken = Probe();
  broken.entries[1].link = LinkKind::kBroken;
  broken.entries[1].resolved = false;
  f.actual["model.qwen@dgx5"] = Actual(broken);
  c = f.Diff("model.qwen@dgx5");
  EXPECT_NE(c.error.find("is the source of model qwen (source: node:dgx5) but is incomplete: "
                         "model-00001-of-00002.safetensors: broken symlink"),
            std::string::npos)
      << c.error;
}

TEST(ModelProvider, LegacyLayoutLocksAndDestroy) {
  Fixture f;
  f.actual["model.qwen@dgx5"] = Actual(Probe());
  HubProbe legacy = Probe();
  legacy.layout = "legacy";
  legacy.lock = StagingLock{"77 dgx2 boot 1700000000", 77, "dgx2", "boot", 1700000000, true};
  f.actual["model.qwen@dgx2"] = Actual(legacy);
  ResourceRecord rec = RecordOf("model.qwen@dgx2", Probe());
  PlanChange c = f.Diff("model.qwen@dgx2", &rec);
  EXPECT_EQ(c.action, Action::kUpdate);
  EXPECT_EQ(c.summary,
            "link the legacy layout (models--org--qwen -> ../models--org--qwen, relative)");
  bool lock_said = false;
  for (const std::string& r : c.reasons)
    lock_said |= r.find("staging in progress by pid 77 on dgx2 since 2023-11-14") == 0;
  EXPECT_TRUE(lock_said);
  legacy.lock->pid_alive = false;
  f.actual["model.qwen@dgx2"] = Actual(legacy);
  c = f.Diff("model.qwen@dgx2", &rec);
  lock_said = false;
  for (const std::string& r : c.reasons)
    lock_said |= r.find("stale staging lock (pid 77") != std::string::npos;
  EXPECT_TRUE(lock_said);

  // Destroy keeps models.
  const DesiredResource* d = Find(f.desired, "model.qwen@dgx2");
  DiffContext ctx{f.facts["dgx2"], &f.facts, &f.actual, &f.m};
  PlanChange k = f.p.DiffDestroy(*d, f.actual["model.qwen@dgx2"], &rec, ctx);
  EXPECT_EQ(k.action, Action::kNoop);
  EXPECT_NE(k.summary.find("kept"), std::string::npos);
}

TEST(ModelProvider, HubModelWithoutReferenceIsVerifiedThenDownloaded) {
  Fixture f;
  f.actual["model.ds@nas"] = Actual(Empty(uint64_t{1} << 40));
  PlanChange c = f.Diff("model.ds@nas");
  EXPECT_EQ(c.action, Action::kCreate);
  EXPECT_EQ(c.summary, "download org/ds@0123456789ab from the hub on dgx1");
  f.actual["model.ds@nas"] = Actual(Probe());
  c = f.Diff("model.ds@nas");
  EXPECT_EQ(c.action, Action::kUpdate);
  EXPECT_NE(c.summary.find("verify 3 files (636 GB) found on store nas (through dgx1), download "
                           "what is missing"),
            std::string::npos)
      << c.summary;
}

TEST(ModelProvider, HubDownloadSizedFromAnotherCopy) {
  // The log's 636 GB download onto 251 GB: another node's copy of the same
  // revision gives the sizes before any download starts.
  Fixture f;
  ModelSpec& ds = f.m.models["ds"];
  ds.store = "local";
  ds.nodes = {"dgx1", "dgx5"};
  f.desired = f.p.Expand(f.m);
  f.actual["model.ds@dgx1"] = Actual(Probe());
  HubProbe small = Empty(251'000'000'000);
  f.actual["model.ds@dgx5"] = Actual(small);
  PlanChange c = f.Diff("model.ds@dgx5");
  EXPECT_EQ(c.error,
            "model.ds@dgx5: needs 636 GB (sizes from the copy at dgx1), dgx5 has 251 GB free at "
            "/srv/hf/hub (filesystem /srv); no store dgx5 mounts has room either");
  f.actual["model.ds@dgx5"] = Actual(Empty(uint64_t{1} << 41));
  c = f.Diff("model.ds@dgx5");
  EXPECT_TRUE(c.error.empty()) << c.error;
  EXPECT_EQ(c.summary, "download org/ds@0123456789ab from the hub on dgx5 (636 GB)");
}

TEST(ModelProvider, PurgeRemovesOnlyWhatFleetStaged) {
  Fixture f;
  f.actual["model.qwen@dgx5"] = Actual(Probe());
  f.actual["model.qwen@dgx2"] = Actual(Probe());
  ResourceRecord staged = RecordOf("model.qwen@dgx2", Probe());
  staged.node = "dgx2";
  staged.attributes["origin"] = "staged";
  staged.attributes["bytes"] = 636'000'000'000;
  ResourceRecord adopted = RecordOf("model.qwen@dgx5", Probe());
  adopted.node = "dgx5";
  adopted.attributes["origin"] = "adopted";
  const DesiredResource* d2 = Find(f.desired, "model.qwen@dgx2");
  const DesiredResource* d5 = Find(f.desired, "model.qwen@dgx5");
  NodeFacts facts;
  DiffContext keep{facts, &f.facts, &f.actual, &f.m};
  DiffContext purge{facts, &f.facts, &f.actual, &f.m, /*purge=*/true};

  // Without --purge nothing is removed, by destroy or by omission.
  EXPECT_EQ(f.p.DiffDestroy(*d2, f.actual["model.qwen@dgx2"], &staged, keep).action, Action::kNoop);
  PlanChange o = f.p.DiffOrphan(staged, keep);
  EXPECT_EQ(o.action, Action::kDelete);
  EXPECT_TRUE(o.detail.value("forget", false));
  EXPECT_NE(o.summary.find("the files stay"), std::string::npos);

  // With --purge: what fleet staged goes; a source it only verified stays.
  PlanChange r = f.p.DiffDestroy(*d2, f.actual["model.qwen@dgx2"], &staged, purge);
  EXPECT_EQ(r.action, Action::kDelete);
  EXPECT_EQ(r.detail["op"], "remove");
  EXPECT_EQ(r.summary, "remove org/qwen@0123456789ab (636 GB) from /srv/hf/hub (--purge)");
  EXPECT_EQ(f.p.DiffOrphan(staged, purge).detail["op"], "remove");
  EXPECT_EQ(f.p.DiffDestroy(*d5, f.actual["model.qwen@dgx5"], &adopted, purge).action,
            Action::kNoop);
  PlanChange a = f.p.DiffOrphan(adopted, purge);
  EXPECT_TRUE(a.detail.value("forget", false));  // the record goes, the files stay
}

TEST(ModelProvider, TwoModelsThatFitAloneDoNotFitTogether) {
  Fixture f;
  ModelSpec other = f.m.models["qwen"];
  other.name = "alpha";  // sorts before qwen: its staging counts first
  other.repo = "org/alpha";
  other.nodes = {"dgx2"};
  f.m.models["alpha"] = other;
  f.desired = f.p.Expand(f.m);
  f.actual["model.alpha@dgx5"] = Actual(Probe());
  f.actual["model.qwen@dgx5"] = Actual(Probe());
  f.actual["model.alpha@dgx2"] = Actual(Empty(1'000'000'000'000));
  f.actual["model.qwen@dgx2"] = Actual(Empty(1'000'000'000'000));
  PlanChange a = f.Diff("model.alpha@dgx2");
  EXPECT_TRUE(a.error.empty()) << a.error;
  PlanChange q = f.Diff("model.qwen@dgx2");
  EXPECT_EQ(q.error,
            "model.qwen@dgx2: needs 636 GB (636 GB for model.alpha@dgx2 in the same plan), dgx2 "
            "has 1.0 TB free at /srv/hf/hub (filesystem /srv); no store dgx2 mounts has room "
            "either");
  // Another filesystem: no contest.
  HubProbe elsewhere = Empty(1'000'000'000'000);
  elsewhere.disk.mount = "/data";
  f.actual["model.alpha@dgx2"] = Actual(elsewhere);
  EXPECT_TRUE(f.Diff("model.qwen@dgx2").error.empty());
}

TEST(ModelProvider, ProgressLines) {
  EXPECT_EQ(ProgressMeter::Format("dgx2 <- dgx1", 1'200'000'000, 4'000'000'000, 10.0),
            "dgx2 <- dgx1: 1.2 GB / 4.0 GB (30%), 120 MB/s, ETA 23 s");
  EXPECT_EQ(ProgressMeter::Format("downloading", 1'200'000'000, 0, 10.0),
            "downloading: 1.2 GB, 120 MB/s");
  EXPECT_EQ(ProgressMeter::Format("x", 100'000'000'000, 636'000'000'000, 1000.0),
            "x: 100 GB / 636 GB (16%), 100 MB/s, ETA 89 min");
  std::vector<std::string> lines;
  ProgressMeter m(
      "copy", 1000, [&](const std::string& l) { lines.push_back(l); }, 0.0);
  m.Add(500);
  m.Add(500);
  m.Finish();
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[2].rfind("copy: 1.0 kB in ", 0), 0u) << lines[2];
}

TEST(ModelProvider, LocationOnNode) {
  Manifest m = Lab();
  Result<HubLocation> l = ModelLocationOnNode(m, "qwen", "dgx5");
  ASSERT_TRUE(l.ok());
  EXPECT_EQ(l->cache, "~/hf-local/hub");
  l = ModelLocationOnNode(m, "ds", "dgx2");
  ASSERT_TRUE(l.ok());
  EXPECT_EQ(l->cache, "/mnt/nas/hub");
  EXPECT_FALSE(ModelLocationOnNode(m, "ds", "dgx3").ok());
  EXPECT_FALSE(ModelLocationOnNode(m, "nope", "dgx3").ok());
}

}  // namespace
}  // namespace fleet
