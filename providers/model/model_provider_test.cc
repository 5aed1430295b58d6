#include "providers/model/model_provider.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <set>

#include "providers/model/model_attrs.h"
#include "providers/model/progress_meter.h"
#include "providers/shared/completeness.h"
#include "providers/shared/hub_remote.h"
#include "providers/shared/hub_test_util.h"
#include "src/fake_clock.h"
#include "src/process_identity.h"
#include "state/state.h"

namespace fleet {
namespace {

using Json = nlohmann::json;

using testing_hub::kRev;
const std::string kRev2 = "fedcba9876543210fedcba9876543210fedcba98";

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

// Two nodes with real caches on this machine under `root` (`address:
// local`): model "tiny" at `revision`, staged on dst from src.
Manifest TinyFromPeer(const std::string& root, const std::string& revision) {
  Manifest m;
  for (const char* n : {"src", "dst"}) {
    NodeSpec s;
    s.name = n;
    s.address = "local";
    s.hf_cache = root + "/" + n + "/hub";
    m.nodes[n] = s;
  }
  ModelSpec q;
  q.name = "tiny";
  q.repo = testing_hub::kRepo;
  q.revision = revision;
  q.store = "local";
  q.source = "node:src";
  q.nodes = {"dst"};
  m.models["tiny"] = q;
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
  EXPECT_NE(script.find("c=\"$HOME\"/hf-local/hub d=models--org--qwen r=" + kRev),
            std::string::npos);
}

TEST(ModelProvider, StoreGoesThroughItsFirstNodeDeclaredOn) {
  ModelProvider p;
  Manifest m = Lab();
  m.nodes["dgx1"].power.present = true;
  m.nodes["dgx1"].power.state = "off";
  ModelSpec from_store = m.models["qwen"];
  from_store.name = "fs";
  from_store.source = "store:nas";
  m.models["fs"] = from_store;
  std::vector<DesiredResource> d = p.Expand(m);
  const DesiredResource* ds = Find(d, "model.ds@nas");
  ASSERT_TRUE(ds);
  // dgx1 is declared off: the store is probed and staged through dgx2.
  EXPECT_EQ(ds->node, "dgx2");
  EXPECT_EQ(ds->depends_on, (std::vector<std::string>{"node.dgx2"}));
  EXPECT_EQ(ds->attributes["store_nodes"], Json::parse(R"(["dgx1", "dgx2"])"));
  EXPECT_EQ(ds->attributes["store_nodes_off"], Json::parse(R"(["dgx1"])"));
  // A model staged from the store reads it through dgx2 too.
  const DesiredResource* fs3 = Find(d, "model.fs@dgx3");
  ASSERT_TRUE(fs3);
  EXPECT_EQ(fs3->attributes["source_node"], "dgx2");
  EXPECT_EQ(fs3->attributes["source_cache"], "/mnt/nas/hub");
  // Every node of the store declared off: the first (the plan says it is off).
  m.nodes["dgx2"].power.present = true;
  m.nodes["dgx2"].power.state = "off";
  EXPECT_EQ(Find(p.Expand(m), "model.ds@nas")->node, "dgx1");
  // A switch declared on changes nothing.
  m = Lab();
  m.nodes["dgx1"].power.present = true;
  EXPECT_EQ(Find(p.Expand(m), "model.ds@nas")->node, "dgx1");
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
  // The route follows: these nodes have no fabric (no probed ports).
  EXPECT_EQ(c.summary,
            "stage from dgx5: 3 file(s), 636 GB; dgx5 \u2192 dgx2 through the controller (dgx5 "
            "has no fabric address: no infiniband/RoCE ports)");
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
  legacy.lock = StagingLock{"77 dgx2 boot 1700000000", 77, "dgx2", "boot", 1700000000, "", true};
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

  // A live keeper on dgx2 whose fleet process this controller finds gone
  // (judged when the probe's output is read): apply will take the lock
  // over. Not when the keeper runs on another host (a shared store): the
  // keeper script ends only its own node's keepers. (4194305: above the
  // kernel's PID_MAX_LIMIT, so no process has it.)
  const ControllerId me = ParseControllerId(ThisControllerId()).value();
  const std::string gone = me.host + "/4194305/" + std::to_string(me.start) + "/" + me.scope;
  for (const std::string& keeper_host : {"dgx2", "dgx9"})
    for (const std::string& controller : {gone, ThisControllerId()}) {
      const DesiredResource* r = Find(f.desired, "model.qwen@dgx2");
      ActualResource a = f.p.ParseProbe(
          *r, "lock\t77 " + keeper_host + " boot 1700000000 " + controller + "\nlockalive\tyes\n",
          f.facts["dgx2"]);
      const HubProbe read = HubProbe::FromJson(a.attributes);
      ASSERT_TRUE(read.lock.has_value());
      EXPECT_EQ(read.lock->controller_gone, controller == gone) << controller;
      legacy.lock = read.lock;
      f.actual["model.qwen@dgx2"] = Actual(legacy);
      c = f.Diff("model.qwen@dgx2", &rec);
      lock_said = false;
      for (const std::string& said : c.reasons)
        lock_said |= said.find("for fleet pid 4194305 on " + me.host +
                               ", whose fleet process is gone: an apply from this controller ends "
                               "its keeper and takes the lock over") != std::string::npos;
      EXPECT_EQ(lock_said, controller == gone && keeper_host == "dgx2")
          << controller << " kept on " << keeper_host;
    }

  // Destroy keeps models.
  const DesiredResource* d = Find(f.desired, "model.qwen@dgx2");
  DiffContext ctx{f.facts["dgx2"], &f.facts, &f.actual, &f.m};
  PlanChange k = f.p.DiffDestroy(*d, f.actual["model.qwen@dgx2"], &rec, ctx);
  EXPECT_EQ(k.action, Action::kNoop);
  EXPECT_NE(k.summary.find("kept"), std::string::npos);
}

// The power fault's leftover: a node that lost power while staging keeps
// the lock directory; a re-apply that finds the model complete removes it,
// so the plan after converges with no lock left.
TEST(ModelProvider, CompleteModelWithAStaleLockRemovesIt) {
  Fixture f;
  f.actual["model.qwen@dgx5"] = Actual(Probe());
  HubProbe here = Probe();
  here.lock = StagingLock{"77 dgx2 boot 1700000000", 77, "dgx2", "boot", 1700000000, "", false};
  f.actual["model.qwen@dgx2"] = Actual(here);
  ResourceRecord rec = RecordOf("model.qwen@dgx2", Probe());
  PlanChange c = f.Diff("model.qwen@dgx2", &rec);
  EXPECT_EQ(c.action, Action::kUpdate);
  EXPECT_EQ(c.summary, "remove the stale staging lock of pid 77");
  EXPECT_EQ(c.detail["op"], "fix");
  EXPECT_EQ(c.detail["clear_stale_lock"], true);

  // Taken before the node's last boot: stale although pid 77 runs again.
  here.lock->pid_alive = true;
  here.lock->boot_id = "an-earlier-boot";
  f.actual["model.qwen@dgx2"] = Actual(here);
  EXPECT_EQ(f.Diff("model.qwen@dgx2", &rec).summary, "remove the stale staging lock of pid 77");

  // A live staging, or one held from another host, is not fleet's to remove.
  here.lock->boot_id = "boot";
  f.actual["model.qwen@dgx2"] = Actual(here);
  c = f.Diff("model.qwen@dgx2", &rec);
  EXPECT_EQ(c.action, Action::kNoop);
  EXPECT_FALSE(c.detail.contains("clear_stale_lock"));
  here.lock = StagingLock{"77 dgx9 boot 1700000000", 77, "dgx9", "boot", 1700000000, "", false};
  f.actual["model.qwen@dgx2"] = Actual(here);
  EXPECT_EQ(f.Diff("model.qwen@dgx2", &rec).action, Action::kNoop);
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

TEST(ModelProvider, StoreThroughTheSecondNodeWhenTheFirstIsDeclaredOff) {
  Fixture f;
  f.m.nodes["dgx1"].power.present = true;
  f.m.nodes["dgx1"].power.state = "off";
  f.desired = f.p.Expand(f.m);
  f.actual["model.ds@nas"] = Actual(Empty(uint64_t{1} << 40));
  PlanChange c = f.Diff("model.ds@nas");
  ASSERT_TRUE(c.error.empty()) << c.error;
  EXPECT_EQ(c.node, "dgx2");
  EXPECT_EQ(c.action, Action::kCreate);
  EXPECT_EQ(c.summary, "download org/ds@0123456789ab from the hub on dgx2");
  EXPECT_FALSE(c.detail.contains("store_nodes"));
  f.actual["model.ds@nas"] = Actual(Probe());
  c = f.Diff("model.ds@nas");
  EXPECT_NE(c.summary.find("found on store nas (through dgx2; dgx1 is declared off)"),
            std::string::npos)
      << c.summary;
}

TEST(ModelProvider, StoreWhoseNodeDoesNotAnswerNamesTheOthers) {
  Fixture f;
  const DesiredResource* d = Find(f.desired, "model.ds@nas");
  ASSERT_EQ(d->node, "dgx1");
  f.facts["dgx1"].reachable = false;
  f.facts["dgx1"].unreachable_reason = "connection refused";
  f.facts["dgx2"].reachable = true;
  DiffContext ctx{f.facts["dgx1"], &f.facts, &f.actual, &f.m};
  PlanChange c = f.p.Diff(*d, ActualResource{}, nullptr, ctx);
  ASSERT_TRUE(c.error.empty()) << c.error;
  EXPECT_EQ(c.action, Action::kCreate);
  ASSERT_EQ(c.reasons.size(), 2u);
  EXPECT_EQ(c.reasons[1],
            "store nas is read through dgx1, the first of its nodes declared on, which does not "
            "answer now; dgx2 also mounts it and answers: declare dgx1 "
            "`power: {state: off}` to go through dgx2");
  f.facts["dgx2"].reachable = false;
  c = f.p.Diff(*d, ActualResource{}, nullptr, ctx);
  ASSERT_EQ(c.reasons.size(), 2u);
  EXPECT_NE(c.reasons[1].find("; dgx2 also mounts it but does not answer either"),
            std::string::npos)
      << c.reasons[1];
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

// What the node's inventory lists with fleet's staged mark and nothing
// knows: named, removed with --purge; what is declared there, or recorded
// under any name, is not.
TEST(ModelProvider, UnrecordedStagedCopiesAreNamedAndPurged) {
  Fixture f;
  f.actual["model.ds@nas"] = Actual(Probe());
  const std::string inventory = "staged\tdgx1\tmodels--org--qwen\t" + kRev + "\t1000\n" +
                                "staged\tdgx1\tmodels--org--old\t" + kRev2 + "\t2000000\n" +
                                "staged\tnas\tmodels--org--ds\t" + kRev + "\t5\n" +  // declared
                                "staged\tnas\tmodels--org--ds\t" + kRev2 + "\t5\n";
  NodeFacts facts;
  std::set<std::string> recorded;
  DiffContext ctx{facts, &f.facts, &f.actual, &f.m, false, nullptr, &recorded};
  EXPECT_TRUE(f.p.DiffUnrecorded("dgx1", ctx).empty());  // no inventory: nothing said
  ctx.inventory = &inventory;
  std::vector<PlanChange> found = f.p.DiffUnrecorded("dgx1", ctx);
  ASSERT_EQ(found.size(), 3u);
  EXPECT_EQ(found[0].address, "model.qwen@dgx1");  // the manifests' name for it
  EXPECT_EQ(found[0].node, "dgx1");
  EXPECT_EQ(found[0].action, Action::kNoop);
  EXPECT_EQ(found[1].address, "model.old-fedcba987654@dgx1");
  EXPECT_EQ(found[1].reasons.at(0),
            "model org/old@fedcba987654 (2.0 MB) in /srv/hf/hub on dgx1 carries fleet's staged "
            "mark but is not in this state, and the manifests do not declare it there: fleet "
            "staged it, and `fleet apply --purge` removes it (or declare it there, and `fleet "
            "state adopt model.old-fedcba987654@dgx1` records it)");
  EXPECT_EQ(found[2].address, "model.ds-fedcba987654@nas");
  EXPECT_EQ(found[2].node, "dgx1");  // the store is read through dgx1

  ctx.purge = true;
  found = f.p.DiffUnrecorded("dgx1", ctx);
  ASSERT_EQ(found.size(), 3u);
  EXPECT_EQ(found[1].action, Action::kDelete);
  EXPECT_EQ(found[1].summary, "remove org/old@fedcba987654 (2.0 MB) from /srv/hf/hub (--purge)");
  const std::optional<ModelRemoval> removal = ModelRemovalOf(found[2].detail);
  ASSERT_TRUE(removal.has_value());
  EXPECT_EQ(removal->cache, "/mnt/nas/hub");
  EXPECT_EQ(removal->revision, kRev2);
  EXPECT_EQ(removal->location, "nas");

  // Recorded under its address (DiffOrphan's), or by content under another.
  recorded.insert("model.qwen@dgx1");
  ResourceRecord other = RecordOf("model.renamed@dgx1", Probe());
  other.node = "dgx1";
  other.attributes["repo"] = "org/old";
  other.attributes["revision"] = kRev2;
  other.attributes["location"] = "dgx1";
  const std::vector<ResourceRecord> records = {other};
  ctx.records = &records;
  found = f.p.DiffUnrecorded("dgx1", ctx);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].address, "model.ds-fedcba987654@nas");

  // The inventory reads the node's cache and the stores read through it.
  const std::string on_dgx1 = f.p.InventoryScript("dgx1", f.m);
  // Its (location, cache) pairs: staged_mark_inventory.sh's parameters.
  EXPECT_NE(on_dgx1.find("set -- dgx1 /srv/hf/hub nas /mnt/nas/hub\n"), std::string::npos)
      << on_dgx1;
  EXPECT_EQ(f.p.InventoryScript("dgx2", f.m).find("/mnt/nas/hub"), std::string::npos);
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

// The lab with model qwen on `revision: main`, allow_floating.
Fixture Floating() {
  Fixture f;
  f.m.models["qwen"].revision = "main";
  f.m.models["qwen"].allow_floating = true;
  f.desired = f.p.Expand(f.m);
  return f;
}

// A probe of a floating revision: refs/main names `commit`.
HubProbe At(HubProbe h, const std::string& commit) {
  h.floating = true;
  h.resolved = commit;
  if (!commit.empty()) h.refs["main"] = commit;
  return h;
}

bool Said(const PlanChange& c, const std::string& text) {
  for (const std::string& r : c.reasons)
    if (r.find(text) != std::string::npos) return true;
  return false;
}

TEST(ModelProvider, FloatingRevisionExpandsWithItsBranch) {
  Fixture f = Floating();
  const DesiredResource* q2 = Find(f.desired, "model.qwen@dgx2");
  EXPECT_EQ(q2->attributes["branch"], "main");
  EXPECT_NE(f.p.ProbeScript(*q2, f.m.nodes["dgx2"]).find("r='' b=main"), std::string::npos);
  // Pinned: no branch, the probe lists the pinned snapshot.
  const DesiredResource* ds = Find(f.desired, "model.ds@nas");
  EXPECT_FALSE(ds->attributes.contains("branch"));
  EXPECT_NE(f.p.ProbeScript(*ds, f.m.nodes["dgx1"]).find("r=" + kRev + " b=''"), std::string::npos);
  // allow_floating on a commit id is a pinned revision.
  f.m.models["ds"].allow_floating = true;
  EXPECT_FALSE(Find(f.p.Expand(f.m), "model.ds@nas")->attributes.contains("branch"));
}

TEST(ModelProvider, FloatingRevisionStagesThePeersCommit) {
  Fixture f = Floating();
  f.actual["model.qwen@dgx5"] = Actual(At(Probe(), kRev));
  f.actual["model.qwen@dgx2"] = Actual(At(Empty(uint64_t{1} << 41), ""));
  PlanChange c = f.Diff("model.qwen@dgx2");
  ASSERT_TRUE(c.error.empty()) << c.error;
  EXPECT_EQ(c.action, Action::kCreate);
  // The route follows: these nodes have no fabric (no probed ports).
  EXPECT_EQ(c.summary,
            "stage from dgx5: 3 file(s), 636 GB; dgx5 \u2192 dgx2 through the controller (dgx5 "
            "has no fabric address: no infiniband/RoCE ports)");
  EXPECT_EQ(c.detail["revision"], kRev);  // what apply stages
  EXPECT_EQ(c.detail["branch"], "main");
  EXPECT_EQ(c.detail["write_ref"], true);
  EXPECT_EQ(c.after["revision"], kRev);
  ASSERT_FALSE(c.reasons.empty());
  EXPECT_EQ(c.reasons[1],  // after the missing snapshot
            "FLOATING REVISION main (allow_floating): dgx2 has no refs/main; staging " + kRev +
                ", what main is on dgx5, and pointing refs/main at it; every download may bring "
                "another commit");
  EXPECT_FALSE(Said(c, "disagree"));

  // refs/main here names a commit it does not hold, and the source has
  // another: the source's commit is staged and the ref pointed at it.
  f.actual["model.qwen@dgx2"] = Actual(At(Empty(uint64_t{1} << 41), kRev2));
  c = f.Diff("model.qwen@dgx2");
  ASSERT_TRUE(c.error.empty()) << c.error;
  EXPECT_EQ(c.detail["revision"], kRev);
  EXPECT_EQ(c.detail["write_ref"], true);
  EXPECT_TRUE(Said(c, "refs/main on dgx2 is " + kRev2 + "; staging " + kRev +
                          ", what main is on dgx5 (fedcba987654 is not complete here, and dgx5 "
                          "has another commit)"));
  EXPECT_TRUE(Said(c,
                   "nodes disagree on what main is: 0123456789ab on dgx5; fedcba987654 on "
                   "dgx2"));
}

TEST(ModelProvider, FloatingRevisionKeepsTheNodesOwnCommitAndSaysTheyDisagree) {
  Fixture f = Floating();
  f.actual["model.qwen@dgx5"] = Actual(At(Probe(), kRev));
  f.actual["model.qwen@dgx3"] = Actual(At(Probe(), kRev));
  f.actual["model.qwen@dgx2"] = Actual(At(Probe(), kRev2));  // staged before main moved
  PlanChange c = f.Diff("model.qwen@dgx2");
  ASSERT_TRUE(c.error.empty()) << c.error;
  EXPECT_EQ(c.action, Action::kUpdate);  // not recorded yet: verify, not restage
  EXPECT_NE(c.summary.find("verify 3 files"), std::string::npos) << c.summary;
  EXPECT_EQ(c.detail["revision"], kRev2);
  EXPECT_EQ(c.detail["write_ref"], false);
  EXPECT_TRUE(Said(c, "FLOATING REVISION main (allow_floating): refs/main on dgx2 is " + kRev2 +
                          "; every download may bring another commit"));
  EXPECT_TRUE(Said(c,
                   "nodes disagree on what main is: 0123456789ab on dgx3, dgx5; fedcba987654 "
                   "on dgx2"));

  // Recorded at that commit: nothing to do, but the plan still says it.
  ResourceRecord rec = RecordOf("model.qwen@dgx2", Probe());
  rec.attributes["revision"] = kRev2;
  rec.attributes["branch"] = "main";
  c = f.Diff("model.qwen@dgx2", &rec);
  EXPECT_EQ(c.action, Action::kNoop) << c.summary;
  ASSERT_EQ(c.reasons.size(), 2u);
  EXPECT_EQ(c.reasons[0].rfind("FLOATING REVISION main", 0), 0u);
  EXPECT_EQ(c.reasons[1].rfind("nodes disagree", 0), 0u);

  // Off: the record of the branch is enough to say so.
  const DesiredResource* d = Find(f.desired, "model.qwen@dgx2");
  NodeFacts off;
  DiffContext ctx{off, &f.facts, &f.actual, &f.m};
  c = f.p.Diff(*d, ActualResource{}, &rec, ctx);
  EXPECT_EQ(c.action, Action::kNoop);
  EXPECT_EQ(c.summary, "node is off: not checked");
}

TEST(ModelProvider, FloatingRevisionFromTheHubResolvesAtDownload) {
  Fixture f;
  f.m.models["ds"].revision = "main";
  f.m.models["ds"].allow_floating = true;
  f.desired = f.p.Expand(f.m);
  f.actual["model.ds@nas"] = Actual(At(Empty(uint64_t{1} << 40), ""));
  PlanChange c = f.Diff("model.ds@nas");
  ASSERT_TRUE(c.error.empty()) << c.error;
  EXPECT_EQ(c.action, Action::kCreate);
  EXPECT_EQ(c.summary, "download org/ds@main from the hub on dgx1");
  EXPECT_EQ(c.detail["revision"], "");
  EXPECT_TRUE(Said(c,
                   "store nas (through dgx1) has no refs/main; the download resolves main on "
                   "the hub"));
  // A branch name that would leave refs/ is refused.
  f.m.models["ds"].revision = "../x";
  f.desired = f.p.Expand(f.m);
  EXPECT_NE(f.Diff("model.ds@nas").error.find("is not a branch name"), std::string::npos);
}

// Real caches on this machine (`address: local`): plan and apply a floating
// revision staged from a peer, then the peer's branch moves.
TEST(ModelProvider, FloatingRevisionAppliedFromAPeerWritesTheRef) {
  testing_hub::TempDir dir;
  Manifest m = TinyFromPeer(dir.path(), "main");
  m.models["tiny"].allow_floating = true;
  const ModelSpec& q = m.models["tiny"];
  const auto files = testing_hub::ThreeShardModel();
  testing_hub::WriteHubModel(m.nodes["src"].hf_cache, q.repo, kRev, files);
  ModelProvider p;
  auto t = testing_hub::Local();
  std::vector<DesiredResource> desired = p.Expand(m);
  auto plan = [&](const std::map<std::string, const ResourceRecord*>& records) {
    std::map<std::string, NodeFacts> facts;
    std::map<std::string, ActualResource> actual;
    for (const DesiredResource& r : desired) {
      facts[r.node].reachable = true;
      Result<CommandResult> out = t->Run(p.ProbeScript(r, m.nodes[r.node]));
      EXPECT_TRUE(out.ok() && out->exit_code == 0);
      actual[r.address] = p.ParseProbe(r, out->out, facts[r.node]);
    }
    std::map<std::string, PlanChange> changes;
    for (const DesiredResource& r : desired) {
      DiffContext ctx{facts[r.node], &facts, &actual, &m};
      auto rec = records.find(r.address);
      changes[r.address] =
          p.Diff(r, actual[r.address], rec == records.end() ? nullptr : rec->second, ctx);
    }
    return changes;
  };
  std::map<std::string, PlanChange> c = plan({});
  PlanChange& dst = c["model.tiny@dst"];
  ASSERT_TRUE(dst.error.empty()) << dst.error;
  EXPECT_EQ(dst.action, Action::kCreate);
  EXPECT_EQ(dst.detail["revision"], kRev);
  StepContext step;
  step.transport = t.get();
  step.node = &m.nodes["dst"];
  step.manifest = &m;
  Result<Json> applied = p.Apply(dst, step);
  ASSERT_TRUE(applied.ok()) << applied.status().message();
  EXPECT_EQ((*applied)["revision"], kRev);
  EXPECT_EQ((*applied)["branch"], "main");
  const std::string mdir = m.nodes["dst"].hf_cache + "/" + HubRepoDirName(q.repo);
  EXPECT_EQ(testing_hub::ReadFile(mdir + "/refs/main"), kRev);
  for (const auto& [path, data] : files)
    EXPECT_EQ(testing_hub::ReadFile(mdir + "/snapshots/" + kRev + "/" + path), data) << path;

  // Recorded: converged, and still said.
  ResourceRecord rec;
  rec.address = "model.tiny@dst";
  rec.type = "model";
  rec.attributes = *applied;
  c = plan({{"model.tiny@dst", &rec}});
  EXPECT_EQ(c["model.tiny@dst"].action, Action::kNoop) << c["model.tiny@dst"].summary;
  EXPECT_TRUE(Said(c["model.tiny@dst"], "refs/main on dst is " + kRev));

  // The source's main moves to a new commit: dst keeps its own, the plan
  // says they disagree, and applying it re-verifies without the source's
  // (different) snapshot and leaves refs/main alone.
  auto next = files;
  next["config.json"] = R"({"architectures": ["TinyForCausalLM"], "hidden_size": 128})";
  testing_hub::WriteHubModel(m.nodes["src"].hf_cache, q.repo, kRev2, next);
  std::filesystem::remove_all(m.nodes["src"].hf_cache + "/" + HubRepoDirName(q.repo) +
                              "/snapshots/" + kRev);
  c = plan({{"model.tiny@dst", &rec}});
  EXPECT_EQ(c["model.tiny@dst"].action, Action::kNoop) << c["model.tiny@dst"].summary;
  EXPECT_TRUE(Said(c["model.tiny@dst"],
                   "nodes disagree on what main is: 0123456789ab on dst; "
                   "fedcba987654 on src"));
  PlanChange again = c["model.tiny@dst"];
  again.detail["op"] = "ensure";
  applied = p.Apply(again, step);
  ASSERT_TRUE(applied.ok()) << applied.status().message();
  EXPECT_EQ((*applied)["revision"], kRev);
  EXPECT_EQ(testing_hub::ReadFile(mdir + "/refs/main"), kRev);
}

// What a state does not know (issue 12): a copy on the node without a
// record is named with `fleet state adopt`, which verifies it in place
// (headers and index read on the node) and records it, downloading and
// writing nothing; a broken or missing copy is refused with the reason.
TEST(ModelProvider, AdoptVerifiesInPlaceAndRecords) {
  testing_hub::TempDir dir;
  Manifest m = TinyFromPeer(dir.path(), kRev);
  const ModelSpec& q = m.models["tiny"];
  auto files = testing_hub::ThreeShardModel();
  testing_hub::WriteHubModel(m.nodes["src"].hf_cache, q.repo, kRev, files);
  ModelProvider p;
  auto t = testing_hub::Local();
  const std::vector<DesiredResource> desired = p.Expand(m);
  const DesiredResource* dst = Find(desired, "model.tiny@dst");
  ASSERT_NE(dst, nullptr);
  std::map<std::string, NodeFacts> facts;
  std::map<std::string, ActualResource> actual;
  auto probe = [&] {
    for (const DesiredResource& r : desired) {
      facts[r.node].reachable = true;
      Result<CommandResult> out = t->Run(p.ProbeScript(r, m.nodes[r.node]));
      ASSERT_TRUE(out.ok() && out->exit_code == 0);
      actual[r.address] = p.ParseProbe(r, out->out, facts[r.node]);
    }
  };
  StepContext step;
  step.transport = t.get();
  step.node = &m.nodes["dst"];
  step.manifest = &m;
  auto adopt = [&] {
    return p.Adopt(*dst, actual[dst->address], DiffContext{facts["dst"], &facts, &actual, &m},
                   &step);
  };

  probe();  // nothing on dst yet: the plan would stage it
  Result<Json> r = adopt();
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("the plan would stage from src"), std::string::npos)
      << r.status().message();

  // A copy with a broken header: the plan sees only sizes, adopt reads it.
  const std::string shard = "model-00001-of-00003.safetensors";
  ASSERT_TRUE(files.count(shard));
  std::string good = files[shard];
  files[shard].replace(0, 8, "XXXXXXXX");
  testing_hub::WriteHubModel(m.nodes["dst"].hf_cache, q.repo, kRev, files);
  probe();
  const std::set<std::string> recorded;
  PlanChange c = p.Diff(*dst, actual[dst->address], nullptr,
                        DiffContext{facts["dst"], &facts, &actual, &m, false, nullptr, &recorded});
  EXPECT_EQ(c.action, Action::kUpdate);
  EXPECT_TRUE(Said(c,
                   "not in this state: `fleet state adopt model.tiny@dst` verifies and records "
                   "it without downloading"))
      << c.summary;
  r = adopt();
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find(shard), std::string::npos) << r.status().message();

  // The right bytes: adopted, and nothing was written.
  std::filesystem::remove_all(m.nodes["dst"].hf_cache);
  files[shard] = good;
  testing_hub::WriteHubModel(m.nodes["dst"].hf_cache, q.repo, kRev, files);
  probe();
  r = adopt();
  ASSERT_TRUE(r.ok()) << r.status().message();
  const ModelRecord rec = r->get<ModelRecord>();
  EXPECT_EQ(rec.revision, kRev);
  EXPECT_EQ(rec.verified, "headers");
  EXPECT_EQ(rec.origin, "adopted");
  ASSERT_TRUE(rec.files.has_value());
  EXPECT_EQ(rec.files->size(), files.size());
  EXPECT_FALSE(std::filesystem::exists(m.nodes["dst"].hf_cache + "/.fleet-staging-" +
                                       HubRepoDirName(q.repo) + ".lock"));
  // Recorded so: the plan has nothing to do.
  ResourceRecord as_recorded;
  as_recorded.address = dst->address;
  as_recorded.type = "model";
  as_recorded.attributes = *r;
  c = p.Diff(*dst, actual[dst->address], &as_recorded,
             DiffContext{facts["dst"], &facts, &actual, &m});
  EXPECT_EQ(c.action, Action::kNoop) << c.summary;
}

TEST(ModelProvider, ProgressLines) {
  EXPECT_EQ(ProgressMeter::Format("dgx2 <- dgx1", 1'200'000'000, 4'000'000'000, 10.0),
            "dgx2 <- dgx1: 1.2 GB / 4.0 GB (30%), 120 MB/s, ETA 23 s");
  EXPECT_EQ(ProgressMeter::Format("downloading", 1'200'000'000, 0, 10.0),
            "downloading: 1.2 GB, 120 MB/s");
  EXPECT_EQ(ProgressMeter::Format("x", 100'000'000'000, 636'000'000'000, 1000.0),
            "x: 100 GB / 636 GB (16%), 100 MB/s, ETA 89 min");
  std::vector<std::string> lines;
  FakeClock clock;
  ProgressMeter m(
      "copy", 1000, [&](const std::string& l) { lines.push_back(l); }, &clock, 0.0);
  m.Add(500);
  m.Add(500);
  m.Finish();
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[2], "copy: 1.0 kB in 0 s");  // no time passed: no rate
}

// At most one line an interval, rates over the time the clock says passed.
TEST(ModelProvider, ProgressMeterPacesItsLinesByTheClock) {
  std::vector<std::string> lines;
  FakeClock clock;
  ProgressMeter m(
      "copy", 4'000'000'000, [&](const std::string& l) { lines.push_back(l); }, &clock, 2.0);
  clock.Advance(std::chrono::seconds(1));
  m.Add(1'000'000'000);
  EXPECT_TRUE(lines.empty());  // 1 s < the 2 s interval
  clock.Advance(std::chrono::seconds(9));
  m.Add(200'000'000);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0], "copy: 1.2 GB / 4.0 GB (30%), 120 MB/s, ETA 23 s");
  m.Add(1);
  EXPECT_EQ(lines.size(), 1u);  // no time passed since the last line
  clock.Advance(std::chrono::seconds(10));
  m.Finish();
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[1], "copy: 1.2 GB in 20 s, 60.0 MB/s");
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
