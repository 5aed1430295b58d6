#include "providers/shared/hub_cache.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <optional>
#include <thread>

#include "providers/shared/completeness.h"
#include "providers/shared/hub_remote.h"
#include "providers/shared/hub_test_util.h"
#include "providers/shared/relative_links_sh.h"
#include "src/shell_quote.h"
#include "tests/support/stub_cli.h"

namespace fleet {
namespace {

using namespace testing_hub;  // NOLINT

HubProbe RunProbe(Transport* t, const std::string& cache,
                  std::vector<std::pair<std::string, std::string>> stores = {}) {
  Result<CommandResult> r = t->Run(HubProbeScript({cache, kRepo, kRev, stores, {}}));
  EXPECT_TRUE(r.ok());
  EXPECT_EQ(r->exit_code, 0) << r->err;
  return ParseHubProbe(r->out);
}

TEST(HubCache, Names) {
  EXPECT_EQ(HubRepoDirName("azampatti/Qwen3.8-Flash"), "models--azampatti--Qwen3.8-Flash");
  EXPECT_EQ(NodePathWord("/srv/hf/hub"), "/srv/hf/hub");
  EXPECT_EQ(NodePathWord("~/hf-local/hub"), "\"$HOME\"/hf-local/hub");
  EXPECT_EQ(NodePathWord("~/a b"), "\"$HOME\"/'a b'");
  EXPECT_EQ(NodePathWord("/x/$(reboot)"), "'/x/$(reboot)'");
}

TEST(HubCache, ParsesProbeOutput) {
  const std::string out =
      "layout\thub\n"
      "ref\tmain\t" +
      kRev +
      "\n"
      "ref\tpr/1\tdeadbeef\n"
      "snap\t" +
      kRev +
      "\n"
      "top\t.done\n"
      "snapshot\t1\n"
      "e\tl\tf\tmodel.safetensors\t../../blobs/aaa\n"
      "e\tl\tN\tgone.json\t../../blobs/bbb\n"
      "e\tl\tf\tabs.json\t/srv/hf/hub/models--org--tiny-model/blobs/ccc\n"
      "e\tf\tf\tplain.txt\t\n"
      "e\tl\tf\tsub/x.safetensors\t../../../blobs/ddd\n"
      "e\tl\tf\tevil.json\t../../blobs/../../../etc/x\n"
      "e\tl\tf\tevil2.json\t../../blobs/a b\n"
      "s\t1234\tmodel.safetensors\n"
      "s\t10\tabs.json\n"
      "s\t3\tplain.txt\n"
      "s\t99\tsub/x.safetensors\n"
      "inc\t500\t1700000000.5\teee.incomplete\n"
      "now\t1700000010\n"
      "lock\t4242 dgx1 b00t 1700000000\n"
      "lockalive\t1\n"
      "df\t251000\t/srv\t/srv/hf/hub\n"
      "dfstore\tnas\t999000\t/mnt/nas\n"
      "garbage line\n";
  HubProbe p = ParseHubProbe(out);
  EXPECT_EQ(p.layout, "hub");
  EXPECT_EQ(p.refs.at("main"), kRev);
  EXPECT_EQ(p.refs.at("pr/1"), "deadbeef");
  EXPECT_TRUE(p.snapshot);
  ASSERT_EQ(p.entries.size(), 7u);
  EXPECT_EQ(p.Find("evil.json")->blob, "");  // not a blob name: never a path elsewhere
  EXPECT_EQ(p.Find("evil2.json")->blob, "");
  const SnapshotEntry* m = p.Find("model.safetensors");
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->link, LinkKind::kRelative);
  EXPECT_EQ(m->blob, "aaa");
  EXPECT_EQ(m->size, 1234u);
  EXPECT_TRUE(m->resolved);
  EXPECT_EQ(p.Find("gone.json")->link, LinkKind::kBroken);
  EXPECT_FALSE(p.Find("gone.json")->resolved);
  EXPECT_EQ(p.Find("abs.json")->link, LinkKind::kAbsolute);
  EXPECT_EQ(p.Find("abs.json")->blob, "ccc");
  EXPECT_EQ(p.Find("plain.txt")->link, LinkKind::kNone);
  EXPECT_EQ(p.Find("sub/x.safetensors")->blob, "ddd");
  ASSERT_EQ(p.incomplete.size(), 1u);
  EXPECT_EQ(p.incomplete[0].mtime, 1700000000);
  EXPECT_EQ(p.now, 1700000010);
  ASSERT_TRUE(p.lock.has_value());
  EXPECT_EQ(p.lock->pid, 4242);
  EXPECT_EQ(p.lock->host, "dgx1");
  EXPECT_TRUE(p.lock->pid_alive);
  EXPECT_EQ(p.disk.avail_bytes, 251000u * 1024);
  EXPECT_EQ(p.disk.mount, "/srv");
  EXPECT_EQ(p.stores.at("nas").avail_bytes, 999000u * 1024);
  EXPECT_EQ(p.top_files, std::vector<std::string>{".done"});

  // Through JSON (how the plan carries it) and back.
  HubProbe q = HubProbe::FromJson(p.ToJson());
  EXPECT_EQ(q.ToJson(), p.ToJson());
}

TEST(HubCache, APathListedTwiceReadsBackFromThePlanAsPrinted) {
  // The hub_cache fuzz target: entries sorted by path alone came back from
  // the plan's JSON in another order when a listing named a path twice.
  std::string out = "layout\thub\n";
  for (int i = 0; i < 20; ++i)
    out += std::string("e\t") + (i % 3 == 0 ? "l\tN" : "f\t") + "\tconfig.json\t" +
           (i % 3 == 0 ? "../../blobs/" + std::to_string(i) : "") + "\n";
  const HubProbe p = ParseHubProbe(out);
  ASSERT_EQ(p.entries.size(), 20u);
  const nlohmann::json once = p.ToJson();
  EXPECT_EQ(HubProbe::FromJson(nlohmann::json::parse(once.dump())).ToJson(), once);
}

TEST(HubCache, ProbesARealLayout) {
  TempDir dir;
  const std::string cache = dir.path() + "/hf hub's";  // a space and a quote
  WriteHubModel(cache, kRepo, kRev, ThreeShardModel());
  auto t = Local();
  HubProbe p = RunProbe(t.get(), cache, {{"nas", dir.path()}});
  ASSERT_TRUE(p.errors.empty()) << p.errors[0];
  EXPECT_EQ(p.layout, "hub");
  EXPECT_TRUE(p.snapshot);
  EXPECT_EQ(p.refs.at("main"), kRev);
  ASSERT_EQ(p.entries.size(), 5u);
  for (const SnapshotEntry& e : p.entries) {
    EXPECT_EQ(e.link, LinkKind::kRelative) << e.path;
    EXPECT_TRUE(e.resolved) << e.path;
    EXPECT_EQ(
        e.size,
        ReadFile(cache + "/" + HubRepoDirName(kRepo) + "/snapshots/" + kRev + "/" + e.path).size());
    EXPECT_EQ(BlobHashKindOf(e.blob) != BlobHashKind::kNone, true) << e.blob;
  }
  EXPECT_TRUE(p.disk.known);
  EXPECT_GT(p.disk.avail_bytes, 0u);
  // df's sixth field, not its capacity ("24% /"): the mount point.
  ASSERT_FALSE(p.disk.mount.empty());
  EXPECT_EQ(p.disk.mount[0], '/') << p.disk.mount;
  EXPECT_EQ(p.disk.mount.find('%'), std::string::npos) << p.disk.mount;
  EXPECT_TRUE(p.stores.at("nas").known);
  EXPECT_GT(p.stores.at("nas").avail_bytes, 0u);
  EXPECT_EQ(p.stores.at("nas").mount, p.disk.mount);
  EXPECT_FALSE(p.lock.has_value());
  Completeness c = CheckCompleteness(p, nullptr, kRev);
  EXPECT_TRUE(c.complete) << JoinProblems(c.problems);
  EXPECT_TRUE(c.notes.empty());
}

// The listing is framed by tabs and newlines: a file name holding one
// (fuzzed names found this) is an error of the probe, never a misread entry.
TEST(HubCache, NameWithATabOrNewlineIsReportedNotMisread) {
  for (const std::string odd : {"a\tb.json", "c\nd.json"}) {
    TempDir dir;
    const std::string cache = dir.path() + "/hub";
    WriteHubModel(cache, kRepo, kRev, ThreeShardModel());
    const std::string snap = cache + "/" + HubRepoDirName(kRepo) + "/snapshots/" + kRev;
    WriteFile(snap + "/" + odd, "{}");
    auto t = Local();
    HubProbe p = RunProbe(t.get(), cache);
    ASSERT_EQ(p.errors.size(), 1u);
    EXPECT_NE(p.errors[0].find("1 name(s) in the snapshot hold a tab or a newline"),
              std::string::npos)
        << p.errors[0];
    EXPECT_EQ(p.entries.size(), 5u);  // the others, read as before
    for (const SnapshotEntry& e : p.entries) EXPECT_TRUE(e.resolved) << e.path;
  }
}

TEST(HubCache, ProbeSeesBrokenAbsoluteIncompleteAndDanglingRefs) {
  TempDir dir;
  const std::string cache = dir.path() + "/hub";
  WriteHubModel(cache, kRepo, kRev, ThreeShardModel());
  const std::string m = cache + "/" + HubRepoDirName(kRepo);
  const std::string snap = m + "/snapshots/" + kRev;
  // A blob deleted under its link, an absolute link, a partial blob, a ref
  // to a snapshot that is not there, a marker.
  std::string shard2 = fs::read_symlink(snap + "/model-00002-of-00003.safetensors").filename();
  fs::remove(m + "/blobs/" + shard2);
  std::string cfg = fs::read_symlink(snap + "/config.json").filename();
  fs::remove(snap + "/config.json");
  fs::create_symlink(m + "/blobs/" + cfg, snap + "/config.json");
  WriteFile(m + "/blobs/" + shard2 + ".incomplete", "abc");
  WriteFile(m + "/refs/other", "ffffffffffffffffffffffffffffffffffffffff");
  WriteFile(m + "/.done", "");
  auto t = Local();
  HubProbe p = RunProbe(t.get(), cache);
  EXPECT_EQ(p.Find("model-00002-of-00003.safetensors")->link, LinkKind::kBroken);
  EXPECT_EQ(p.Find("config.json")->link, LinkKind::kAbsolute);
  EXPECT_TRUE(p.Find("config.json")->resolved);
  ASSERT_EQ(p.incomplete.size(), 1u);
  EXPECT_EQ(p.incomplete[0].size, 3u);
  EXPECT_GT(p.now, 0);
  Completeness c = CheckCompleteness(p, nullptr, kRev);
  EXPECT_FALSE(c.complete);
  EXPECT_NE(JoinProblems(c.problems).find("model-00002-of-00003.safetensors: broken symlink"),
            std::string::npos);
  EXPECT_EQ(c.absolute_links, std::vector<std::string>{"config.json"});
  std::string notes;
  for (const std::string& n : c.notes) notes += n + "\n";
  EXPECT_NE(notes.find("refs/other points at ffff"), std::string::npos) << notes;
  EXPECT_NE(notes.find(".incomplete"), std::string::npos) << notes;
  EXPECT_NE(notes.find("marker .done"), std::string::npos) << notes;

  // MakeLinksRelative repairs the absolute link.
  Status s = MakeLinksRelative(t.get(), {cache, kRepo, kRev}, c.absolute_links);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(fs::read_symlink(snap + "/config.json").string(), "../../blobs/" + cfg);
}

TEST(HubCache, LegacyLayoutIsDetectedAndLinkedRelative) {
  TempDir dir;
  const std::string cache = dir.path() + "/hf-local/hub";
  fs::create_directories(cache);
  WriteHubModel(cache, kRepo, kRev, ThreeShardModel(),
                dir.path() + "/hf-local/" + HubRepoDirName(kRepo));
  auto t = Local();
  HubProbe p = RunProbe(t.get(), cache);
  EXPECT_EQ(p.layout, "legacy");
  EXPECT_TRUE(p.snapshot);
  EXPECT_EQ(p.entries.size(), 5u);
  Status s = FixLegacyLayout(t.get(), {cache, kRepo, kRev});
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(fs::read_symlink(cache + "/" + HubRepoDirName(kRepo)).string(),
            "../" + HubRepoDirName(kRepo));
  p = RunProbe(t.get(), cache);
  EXPECT_EQ(p.layout, "hub");
  EXPECT_EQ(p.repo_link, "../" + HubRepoDirName(kRepo));
  EXPECT_TRUE(FixLegacyLayout(t.get(), {cache, kRepo, kRev}).ok());  // idempotent
  // Removal (--purge) takes the legacy folder and the link to it.
  uint64_t freed = 0;
  ASSERT_TRUE(RemoveModelRevision(t.get(), {cache, kRepo, kRev}, &freed).ok());
  EXPECT_GT(freed, 0u);
  EXPECT_FALSE(fs::exists(dir.path() + "/hf-local/" + HubRepoDirName(kRepo)));
  EXPECT_FALSE(fs::is_symlink(cache + "/" + HubRepoDirName(kRepo)));
}

// legacy_layout_link.sh leaves a folder in the link's way as it is, and
// says so.
TEST(HubCache, LegacyLayoutLinkLeavesAFolderInItsWay) {
  TempDir dir;
  const std::string cache = dir.path() + "/hf-local/hub";
  fs::create_directories(cache + "/" + HubRepoDirName(kRepo));
  WriteHubModel(cache, kRepo, kRev, ThreeShardModel(),
                dir.path() + "/hf-local/" + HubRepoDirName(kRepo));
  auto t = Local();
  const Status s = FixLegacyLayout(t.get(), {cache, kRepo, kRev});
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("exists and is not a symlink; left as is"), std::string::npos)
      << s.message();
  EXPECT_FALSE(fs::is_symlink(cache + "/" + HubRepoDirName(kRepo)));
  EXPECT_FALSE(FixLegacyLayout(t.get(), {dir.path() + "/empty/hub", kRepo, kRev}).ok());
}

// relative_links.sh on its own: a link whose relative target resolves (the
// repo's own blob) is made relative; one whose blob this repo lacks is left.
TEST(HubCache, RelativeLinksOnlyWhereTheBlobIsTheRepos) {
  const testing_support::StubCli stub("relative_links_test");
  const std::string m = stub.dir() + "/m";
  stub.Write("m/blobs/aaa", "A");
  stub.Write("elsewhere/bbb", "B");
  fs::create_directories(m + "/snapshots/rev/sub");
  fs::create_symlink(m + "/blobs/aaa", m + "/snapshots/rev/a.json");
  fs::create_symlink(stub.dir() + "/elsewhere/bbb", m + "/snapshots/rev/sub/b.json");
  const testing_support::ShellRun run = stub.Run(
      "m=" + ShellQuote(m) + " r=rev\nset -- a.json ../../blobs/aaa sub/b.json " +
      "../../../blobs/bbb\n" + std::string(kRelativeLinksScript, kRelativeLinksScriptSize));
  EXPECT_EQ(run.exit_code, 0);
  EXPECT_EQ(fs::read_symlink(m + "/snapshots/rev/a.json").string(), "../../blobs/aaa");
  EXPECT_EQ(fs::read_symlink(m + "/snapshots/rev/sub/b.json").string(),
            stub.dir() + "/elsewhere/bbb");
}

TEST(HubCache, RemoveRevisionKeepsSharedBlobs) {
  TempDir dir;
  const std::string cache = dir.path() + "/hub";
  const std::string other = "ffffffffffffffffffffffffffffffffffffffff";
  auto files = ThreeShardModel();
  WriteHubModel(cache, kRepo, kRev, files);
  // Another revision shares config.json and shard 1 (same content, same blob).
  std::map<std::string, std::string> next = {
      {"config.json", files["config.json"]},
      {"model-00001-of-00003.safetensors", files["model-00001-of-00003.safetensors"]}};
  WriteHubModel(cache, kRepo, other, next);
  WriteFile(cache + "/" + HubRepoDirName(kRepo) + "/refs/main", kRev);
  auto t = Local();
  uint64_t freed = 0;
  Status s = RemoveModelRevision(t.get(), {cache, kRepo, kRev}, &freed);
  ASSERT_TRUE(s.ok()) << s.message();
  const std::string m = cache + "/" + HubRepoDirName(kRepo);
  EXPECT_FALSE(fs::exists(m + "/snapshots/" + kRev));
  EXPECT_FALSE(fs::exists(m + "/refs/main"));  // it named the removed revision
  EXPECT_EQ(freed, files["model-00002-of-00003.safetensors"].size() +
                       files["model-00003-of-00003.safetensors"].size() +
                       files["model.safetensors.index.json"].size());
  HubProbe p = RunProbe(t.get(), cache);  // probes kRev: gone
  EXPECT_FALSE(p.snapshot);
  EXPECT_EQ(p.layout, "hub");
  Result<HubProbe> o = ProbeHub(t.get(), {cache, kRepo, other});
  ASSERT_TRUE(o.ok());
  Completeness c = CheckCompleteness(*o, nullptr, other);
  EXPECT_TRUE(c.complete) << JoinProblems(c.problems);  // the shared blobs stayed
  // Removing the last revision removes the repo folder; twice is fine.
  ASSERT_TRUE(RemoveModelRevision(t.get(), {cache, kRepo, other}, &freed).ok());
  EXPECT_FALSE(fs::exists(m));
  ASSERT_TRUE(RemoveModelRevision(t.get(), {cache, kRepo, other}, &freed).ok());
  EXPECT_EQ(freed, 0u);
}

TEST(HubCache, DeepVerifyHashesEveryBlobAgainstItsName) {
  TempDir dir;
  const std::string cache = dir.path() + "/hub";
  auto files = ThreeShardModel();
  files["sub dir/tokenizer.json"] = R"({"v": 1})";
  WriteHubModel(cache, kRepo, kRev, files);
  auto t = Local();
  HubLocation loc{cache, kRepo, kRev};
  Listing listing = ListingFromProbe(RunProbe(t.get(), cache));
  ASSERT_EQ(listing.size(), 6u);
  uint64_t seen = 0;
  Result<NodeHashReport> r = DeepVerifyOnNode(
      t.get(), loc, listing, 2, [&](const std::string&, uint64_t size) { seen += size; });
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_TRUE(r->problems.empty()) << JoinProblems(r->problems);
  EXPECT_EQ(seen, ListingBytes(listing));
  // The script reports what it ran at once and what the hashing cost.
  EXPECT_EQ(r->files_at_once, 2);
  EXPECT_GE(r->cpu_seconds, 0.0);
  // One flipped byte in a shard and in a git blob: both named.
  const std::string snap = cache + "/" + HubRepoDirName(kRepo) + "/snapshots/" + kRev + "/";
  for (const char* f : {"model-00002-of-00003.safetensors", "config.json"}) {
    std::string path = fs::canonical(snap + f);
    std::string data = ReadFile(path);
    data[data.size() / 2] ^= 1;
    WriteFile(path, data);
  }
  r = DeepVerifyOnNode(t.get(), loc, listing, 0, nullptr);  // 0: the node's cores
  ASSERT_TRUE(r.ok()) << r.status().message();
  const std::vector<std::string>& bad = r->problems;
  ASSERT_EQ(bad.size(), 2u) << JoinProblems(bad);
  EXPECT_EQ(bad[0].rfind("config.json: content hash ", 0), 0u) << bad[0];
  EXPECT_EQ(bad[1].rfind("model-00002-of-00003.safetensors: content hash ", 0), 0u) << bad[1];
  EXPECT_GE(r->files_at_once, 1);
}

// HOME for the node-side scripts of one test (the local transport's sh
// inherits this process's environment), restored after.
class ScopedHome {
 public:
  explicit ScopedHome(const std::string& home) {
    const char* old = getenv("HOME");
    if (old != nullptr) old_ = old;
    fs::create_directories(home + "/.fleet/bin");
    setenv("HOME", home.c_str(), 1);
  }
  ~ScopedHome() { old_ ? setenv("HOME", old_->c_str(), 1) : unsetenv("HOME"); }

 private:
  std::optional<std::string> old_;
};

// The node's installed fleet-probe (FLEET_PROBE: the build's, set by meson)
// hashes the sha256 blobs; the report names it. A probe without --sha256
// (an older one) leaves it to OpenSSL's CLI, as strict.
TEST(HubCache, DeepVerifyHashesWithTheInstalledProbe) {
  const char* probe = getenv("FLEET_PROBE");
  ASSERT_NE(probe, nullptr) << "FLEET_PROBE names the fleet-probe build (meson sets it)";
  TempDir dir;
  const std::string cache = dir.path() + "/hub";
  WriteHubModel(cache, kRepo, kRev, ThreeShardModel());
  ScopedHome home(dir.path() + "/home");
  const std::string installed = dir.path() + "/home/.fleet/bin/fleet-probe";
  fs::copy_file(probe, installed);
  auto t = Local();
  HubLocation loc{cache, kRepo, kRev};
  Listing listing = ListingFromProbe(RunProbe(t.get(), cache));
  Result<NodeHashReport> r = DeepVerifyOnNode(t.get(), loc, listing, 2, nullptr);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_TRUE(r->problems.empty()) << JoinProblems(r->problems);
  EXPECT_EQ(r->hasher, "fleet-probe");
  EXPECT_EQ(r->files_at_once, 2);
  EXPECT_GE(r->cpu_seconds, 0.0);
  const std::string snap = cache + "/" + HubRepoDirName(kRepo) + "/snapshots/" + kRev + "/";
  const std::string shard = fs::canonical(snap + "model-00002-of-00003.safetensors");
  std::string data = ReadFile(shard);
  data[data.size() / 2] ^= 1;
  WriteFile(shard, data);
  // 0: the node's cores. fleet-probe gets a thread per core (it keeps them
  // busy to the end itself); OpenSSL's CLI all 3 shards at once (up to four
  // per core), for the kernel to share the cores. (On 3 or more cores both
  // are 3: this tells them apart on 1 or 2.)
  const int cores = std::max(1u, std::thread::hardware_concurrency());
  for (const char* kind : {"fleet-probe", "an older probe"}) {
    const bool by_probe = std::string(kind) == "fleet-probe";
    if (!by_probe) WriteFile(installed, "#!/bin/sh\nexit 2\n");
    r = DeepVerifyOnNode(t.get(), loc, listing, 0, nullptr);
    ASSERT_TRUE(r.ok()) << kind << ": " << r.status().message();
    EXPECT_EQ(r->hasher == "fleet-probe", by_probe) << r->hasher;
    EXPECT_EQ(r->files_at_once, by_probe ? std::min(cores, 3) : 3) << kind;
    ASSERT_EQ(r->problems.size(), 1u) << kind << ": " << JoinProblems(r->problems);
    EXPECT_EQ(r->problems[0].rfind("model-00002-of-00003.safetensors: content hash ", 0), 0u)
        << r->problems[0];
  }
  // A blob the probe cannot read: the step fails naming it.
  fs::copy_file(probe, installed, fs::copy_options::overwrite_existing);
  fs::remove(fs::canonical(snap + "model-00003-of-00003.safetensors"));
  r = DeepVerifyOnNode(t.get(), loc, listing, 0, nullptr);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(
      r.status().message().find("fleet-probe: ./model-00003-of-00003.safetensors: No such file"),
      std::string::npos)
      << r.status().message();
}

TEST(HubCache, NodeHashTimesReadBashTimesOutput) {
  NodeHashReport r;
  ParseNodeHashTimes(
      "noise\nfleet-hasher fleet-probe\nfleet-hash-times 3\n0m0.010s 0m0.002s\n1m2.500s "
      "0m0.250s\n",
      &r);
  EXPECT_EQ(r.files_at_once, 3);
  EXPECT_DOUBLE_EQ(r.cpu_seconds, 62.75);
  EXPECT_EQ(r.hasher, "fleet-probe");
  NodeHashReport none;
  ParseNodeHashTimes("fleet-hash-times 2\n0m0.010s 0m0.002s\nnot times\n", &none);
  EXPECT_EQ(none.files_at_once, 2);
  EXPECT_EQ(none.cpu_seconds, -1);
  EXPECT_EQ(none.hasher, "");
  NodeHashReport absent;
  ParseNodeHashTimes("", &absent);
  EXPECT_EQ(absent.files_at_once, 0);
}

TEST(HubCache, AbsentCacheStillReportsFreeSpace) {
  TempDir dir;
  auto t = Local();
  HubProbe p = RunProbe(t.get(), dir.path() + "/not/yet/there");
  EXPECT_EQ(p.layout, "absent");
  EXPECT_FALSE(p.snapshot);
  EXPECT_TRUE(p.disk.known);
  EXPECT_EQ(p.disk.path, dir.path());
}

TEST(HubCache, HeaderStreamCarriesAnyBytes) {
  std::string header = "{\"a\":\n\t{}}\n";
  std::string out = "H\t100\t0b00000000000000\t11\tx/y.safetensors\n" + header +
                    "I\t5\tmodel.safetensors.index.json\nH\t{}\n"
                    "H\t3\t0102\t0\tshort.safetensors\n";
  Result<SnapshotHeaders> h = ParseHeaderStream(out);
  ASSERT_TRUE(h.ok()) << h.status().message();
  ASSERT_EQ(h->headers.size(), 2u);
  EXPECT_EQ(h->headers[0].path, "x/y.safetensors");
  EXPECT_EQ(h->headers[0].header_length, 11u);
  EXPECT_EQ(h->headers[0].header, header);
  EXPECT_EQ(h->indexes.at("model.safetensors.index.json"), "H\t{}\n");
  EXPECT_EQ(h->headers[1].header_length, 0x0201u);
  EXPECT_FALSE(ParseHeaderStream("H\t100\t0b00000000000000\t11\tx\nabc").ok());
  EXPECT_FALSE(ParseHeaderStream("Z\tq\n").ok());
  // Found auditing the parsers for exceptions (fuzz/): a length that is not hex made
  // std::stoull throw out of the parser (and out of `fleet apply`).
  bool parsed = true;
  ASSERT_NO_THROW(parsed = ParseHeaderStream("H\t100\tzz00000000000000\t0\tx\n").ok());
  EXPECT_FALSE(parsed);
}

TEST(HubCache, ReadsRealHeadersAndIndexes) {
  TempDir dir;
  const std::string cache = dir.path() + "/hub";
  auto files = ThreeShardModel();
  WriteHubModel(cache, kRepo, kRev, files);
  auto t = Local();
  HubLocation loc{cache, kRepo, kRev};
  Result<SnapshotHeaders> h = ReadSnapshotHeaders(t.get(), loc);
  ASSERT_TRUE(h.ok()) << h.status().message();
  EXPECT_EQ(h->headers.size(), 3u);
  EXPECT_EQ(h->indexes.size(), 1u);
  HubProbe p = RunProbe(t.get(), cache);
  EXPECT_TRUE(CheckSafetensors(h->headers, h->indexes, ListingFromProbe(p)).empty());

  // Truncate shard 3's blob: its header no longer matches the file.
  const std::string snap = cache + "/" + HubRepoDirName(kRepo) + "/snapshots/" + kRev + "/";
  fs::resize_file(fs::canonical(snap + "model-00003-of-00003.safetensors"),
                  files["model-00003-of-00003.safetensors"].size() - 10);
  h = ReadSnapshotHeaders(t.get(), loc);
  ASSERT_TRUE(h.ok());
  p = RunProbe(t.get(), cache);
  std::vector<std::string> problems = CheckSafetensors(h->headers, h->indexes, ListingFromProbe(p));
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_NE(problems[0].find("model-00003-of-00003.safetensors: "), std::string::npos);
  EXPECT_NE(problems[0].find("truncated"), std::string::npos) << problems[0];
}

// snapshot_headers.sh on its own: a header it reads whole, one whose length
// runs past its file (sent as FOLLOW 0), a file too short for a length,
// an index whole; exit 3 and no stream without the snapshot.
TEST(HubCache, SnapshotHeadersScriptFramesWhatItReads) {
  const testing_support::StubCli stub("snapshot_headers_test");
  const HubLocation loc{stub.dir() + "/hub", kRepo, kRev};
  testing_support::ShellRun run = stub.Run(SnapshotHeadersScript(loc));
  EXPECT_EQ(run.exit_code, 3);
  EXPECT_EQ(run.out, "");

  const std::string snap = "hub/" + HubRepoDirName(kRepo) + "/snapshots/" + kRev + "/";
  const std::string header = "{\"a\":1}";
  stub.Write(snap + "good.safetensors", std::string("\x07\0\0\0\0\0\0\0", 8) + header + "DATA");
  stub.Write(snap + "sub/long.safetensors", std::string("\xff\0\0\0\0\0\0\0", 8) + "{}");
  stub.Write(snap + "short.safetensors", "abc");
  stub.Write(snap + "model.safetensors.index.json", "{\"weight_map\":{}}\n");
  stub.Write(snap + "README.md", "not read");
  run = stub.Run(SnapshotHeadersScript(loc));
  EXPECT_EQ(run.exit_code, 0);
  Result<SnapshotHeaders> h = ParseHeaderStream(run.out);
  ASSERT_TRUE(h.ok()) << h.status().message() << "\n" << run.out;
  std::map<std::string, HeaderSample> by_path;
  for (const HeaderSample& s : h->headers) by_path[s.path] = s;
  ASSERT_EQ(by_path.size(), 3u) << run.out;
  EXPECT_EQ(by_path["good.safetensors"].header_length, 7u);
  EXPECT_EQ(by_path["good.safetensors"].header, header);
  EXPECT_EQ(by_path["good.safetensors"].size, 19u);
  EXPECT_EQ(by_path["sub/long.safetensors"].header_length, 255u);
  EXPECT_EQ(by_path["sub/long.safetensors"].header, "");
  EXPECT_EQ(by_path["short.safetensors"].header, "");
  EXPECT_EQ(h->indexes.size(), 1u);
  EXPECT_EQ(h->indexes["model.safetensors.index.json"], "{\"weight_map\":{}}\n");
}

TEST(HubCache, FloatingRevisionResolvedThroughRefsOnTheNode) {
  TempDir dir;
  const std::string cache = dir.path() + "/hub";
  const std::string older = "fedcba9876543210fedcba9876543210fedcba98";
  auto files = ThreeShardModel();
  WriteHubModel(cache, kRepo, older, {{"config.json", files["config.json"]}});
  WriteHubModel(cache, kRepo, kRev, files);  // refs/main -> kRev
  auto t = Local();
  const std::string m = cache + "/" + HubRepoDirName(kRepo);

  // refs/main names kRev: its snapshot is the one listed.
  Result<HubProbe> p = ProbeHub(t.get(), {cache, kRepo, "main"}, "main");
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_TRUE(p->floating);
  EXPECT_EQ(p->resolved, kRev);
  EXPECT_TRUE(p->IsCommit());
  EXPECT_TRUE(p->snapshot);
  EXPECT_EQ(p->entries.size(), 5u);
  EXPECT_TRUE(CheckCompleteness(*p, nullptr, kRev).complete);
  // The parsed probe survives the plan's JSON.
  HubProbe j = HubProbe::FromJson(p->ToJson());
  EXPECT_TRUE(j.floating);
  EXPECT_EQ(j.resolved, kRev);

  // The branch moves (no trailing newline, as the hub writes it): the other
  // snapshot is listed.
  WriteFile(m + "/refs/main", older);
  p = ProbeHub(t.get(), {cache, kRepo, "main"}, "main");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->resolved, older);
  ASSERT_EQ(p->entries.size(), 1u);
  EXPECT_EQ(p->entries[0].path, "config.json");

  // A ref that is not a commit id lists nothing, and says what it holds.
  WriteFile(m + "/refs/main", "../../etc\n");
  p = ProbeHub(t.get(), {cache, kRepo, "main"}, "main");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->resolved, "../../etc");
  EXPECT_FALSE(p->IsCommit());
  EXPECT_FALSE(p->snapshot);
  EXPECT_TRUE(p->entries.empty());

  // No such branch: resolved to nothing, no snapshot (not snapshots/ itself).
  p = ProbeHub(t.get(), {cache, kRepo, "dev"}, "dev");
  ASSERT_TRUE(p.ok());
  EXPECT_TRUE(p->floating);
  EXPECT_EQ(p->resolved, "");
  EXPECT_FALSE(p->snapshot);
  EXPECT_TRUE(p->entries.empty());

  // A pinned probe says nothing about branches.
  p = ProbeHub(t.get(), {cache, kRepo, kRev});
  ASSERT_TRUE(p.ok());
  EXPECT_FALSE(p->floating);
  EXPECT_FALSE(p->ToJson().contains("resolved"));
}

TEST(HubCache, BranchNames) {
  for (const char* ok : {"main", "release/v1.2", "pr_7-x"}) EXPECT_TRUE(IsSafeBranchName(ok)) << ok;
  for (const char* bad : {"", "..", "../x", "a/../b", "a/..", "/main", "main/", "a//b", "-x", "./a",
                          "a b", "a;b", "$(x)"})
    EXPECT_FALSE(IsSafeBranchName(bad)) << bad;
  EXPECT_TRUE(IsCommitId(kRev));
  EXPECT_FALSE(IsCommitId("main"));
  EXPECT_FALSE(IsCommitId("0123456789ABCDEF0123456789abcdef01234567"));
}

}  // namespace
}  // namespace fleet
