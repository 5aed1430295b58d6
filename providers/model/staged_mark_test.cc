// The staged mark on real hub cache folders, through a local transport:
// written, seen by the probe and the inventory, taken by a removal.
#include "providers/model/staged_mark.h"

#include <gtest/gtest.h>

#include "providers/shared/hub_test_util.h"
#include "src/shell_quote.h"
#include "tests/support/stub_cli.h"

namespace fleet {
namespace {

using namespace testing_hub;  // NOLINT

std::string RunOk(Transport* t, const std::string& script) {
  Result<CommandResult> r = t->Run(script);
  EXPECT_TRUE(r.ok());
  EXPECT_EQ(r->exit_code, 0) << r->err;
  return r->out;
}

TEST(StagedMark, RepoOfDirName) {
  EXPECT_EQ(RepoOfDirName("models--org--tiny-model"), "org/tiny-model");
  EXPECT_EQ(RepoOfDirName("models--gpt2"), "gpt2");
  EXPECT_EQ(RepoOfDirName("datasets--org--x"), "");
  EXPECT_EQ(RepoOfDirName("models--"), "");
  EXPECT_EQ(RepoOfDirName("models--a--b--c"), "");
  EXPECT_EQ(RepoOfDirName(".fleet-staging-models--org--x.lock"), "");
}

TEST(StagedMark, ParsesTheInventory) {
  const std::string other(40, 'f');
  const std::vector<StagedCopy> c = ParseStagedMarks(
      "staged\tdgx1\tmodels--org--tiny-model\t" + kRev + "\t1234\n" +
      "staged\tdgx1\tmodels--org--tiny-model\t" + kRev + "\t1234\n" +  // twice: once
      "staged\tnas\tmodels--gpt2\t" + other + "\t0\n" +
      "staged\tdgx1\tmodels--org--x\tmain\t5\n" +             // no commit
      "staged\tdgx1\tdatasets--org--x\t" + other + "\t5\n" +  // no model
      "staged\tdgx1\tmodels--org--x\t" + other + "\t12x\n" +  // no size
      "staged\tdgx1\tmodels--org--x\t" + other + "\n" + "garbage\n");
  ASSERT_EQ(c.size(), 2u);
  EXPECT_EQ(c[0].location, "dgx1");
  EXPECT_EQ(c[0].repo, kRepo);
  EXPECT_EQ(c[0].revision, kRev);
  EXPECT_EQ(c[0].bytes, 1234u);
  EXPECT_EQ(c[1].location, "nas");
  EXPECT_EQ(c[1].repo, "gpt2");
}

// Only marked revisions whose snapshot is there are listed; a copy the node
// had before fleet (no mark) never is; the removal takes the mark.
TEST(StagedMark, WrittenListedAndRemoved) {
  TempDir dir;
  const std::string cache = dir.path() + "/hub", store = dir.path() + "/nas";
  const std::string other = "ffffffffffffffffffffffffffffffffffffffff";
  auto files = ThreeShardModel();
  WriteHubModel(cache, kRepo, kRev, files);
  WriteHubModel(cache, kRepo, other, {{"config.json", files["config.json"]}});
  WriteHubModel(cache, "org/found", kRev, {{"config.json", files["config.json"]}});
  WriteHubModel(store, kRepo, other, {{"config.json", files["config.json"]}});
  auto t = Local();
  const std::vector<std::pair<std::string, std::string>> caches = {{"dgx1", cache}, {"nas", store}};
  EXPECT_TRUE(ParseStagedMarks(RunOk(t.get(), StagedMarkInventoryScript(caches))).empty());

  RunOk(t.get(), WriteStagedMarkScript({cache, kRepo, kRev}));
  RunOk(t.get(), WriteStagedMarkScript({cache, kRepo, kRev}));  // idempotent
  RunOk(t.get(), WriteStagedMarkScript({cache, kRepo, other}));
  RunOk(t.get(), WriteStagedMarkScript({store, kRepo, other}));
  // A mark whose snapshot is gone (removed by hand) is not listed.
  RunOk(t.get(), WriteStagedMarkScript({cache, "org/gone", kRev}));
  const std::string m = cache + "/" + HubRepoDirName(kRepo);
  EXPECT_EQ(ReadFile(m + "/.fleet-staged/" + kRev),
            "staged by fleet: " + kRepo + "@" + kRev + "\n");

  std::vector<StagedCopy> listed =
      ParseStagedMarks(RunOk(t.get(), StagedMarkInventoryScript(caches)));
  ASSERT_EQ(listed.size(), 3u);
  uint64_t bytes = 0;
  for (const auto& [name, data] : files) bytes += data.size();
  EXPECT_EQ(listed[0].location, "dgx1");
  EXPECT_EQ(listed[0].revision, kRev);
  EXPECT_EQ(listed[0].bytes, bytes);
  EXPECT_EQ(listed[1].revision, other);
  EXPECT_EQ(listed[1].bytes, files["config.json"].size());
  EXPECT_EQ(listed[2].location, "nas");

  // The probe of one revision sees its mark; the mark is no file of the
  // repo's top (the probe's markers).
  Result<HubProbe> p = ProbeHub(t.get(), {cache, kRepo, kRev});
  ASSERT_TRUE(p.ok());
  EXPECT_TRUE(p->staged_mark);
  EXPECT_TRUE(p->top_files.empty());
  EXPECT_TRUE(HubProbe::FromJson(p->ToJson()).staged_mark);
  p = ProbeHub(t.get(), {cache, "org/found", kRev});
  ASSERT_TRUE(p.ok());
  EXPECT_FALSE(p->staged_mark);

  uint64_t freed = 0;
  ASSERT_TRUE(RemoveModelRevision(t.get(), {cache, kRepo, kRev}, &freed).ok());
  EXPECT_FALSE(fs::exists(m + "/.fleet-staged/" + kRev));
  EXPECT_TRUE(fs::exists(m + "/.fleet-staged/" + other));
  listed = ParseStagedMarks(RunOk(t.get(), StagedMarkInventoryScript(caches)));
  ASSERT_EQ(listed.size(), 2u);
  EXPECT_EQ(listed[0].revision, other);
  ASSERT_TRUE(RemoveModelRevision(t.get(), {cache, kRepo, other}, &freed).ok());
  EXPECT_FALSE(fs::exists(m));
}

// staged_mark_inventory.sh with a stand-in timeout(1): a cache whose stat
// times out (a hung network mount) is named unanswered and never globbed;
// the others are listed, their sizes read under timeout too.
TEST(StagedMark, InventorySkipsACacheThatDoesNotAnswer) {
  const testing_support::StubCli stub("staged_mark_test");
  const std::string cache = stub.dir() + "/hub", hung = stub.dir() + "/nas";
  WriteHubModel(cache, kRepo, kRev, {{"config.json", "{}"}});
  WriteHubModel(hung, kRepo, kRev, {{"config.json", "{}"}});
  auto t = Local();
  RunOk(t.get(), WriteStagedMarkScript({cache, kRepo, kRev}));
  RunOk(t.get(), WriteStagedMarkScript({hung, kRepo, kRev}));
  // timeout -k 5 SECONDS CMD...: the stat of the hung cache times out.
  stub.RecordingTool("timeout", "[ \"$4 $7\" = " + ShellQuote("stat " + hung) +
                                    " ] && exit 124\nshift 3\nexec \"$@\"\n");
  const testing_support::ShellRun run =
      stub.Run(StagedMarkInventoryScript({{"dgx1", cache}, {"nas", hung}}));
  EXPECT_EQ(run.exit_code, 0);
  EXPECT_NE(run.out.find("unanswered\tnas\t" + hung + "\n"), std::string::npos) << run.out;
  const std::vector<StagedCopy> listed = ParseStagedMarks(run.out);
  ASSERT_EQ(listed.size(), 1u) << run.out;
  EXPECT_EQ(listed[0].location, "dgx1");
  EXPECT_EQ(listed[0].bytes, 2u);
  const std::string calls = stub.Calls("timeout");
  EXPECT_NE(calls.find("-k 5 120 find -L " + cache + "/" + HubRepoDirName(kRepo) + "/snapshots/" +
                       kRev + " -type f"),
            std::string::npos)
      << calls;
  EXPECT_EQ(calls.find("find -L " + hung), std::string::npos) << calls;
}

// Before a first download there is no repo folder: the mark goes where the
// hub layout's will be, never into a legacy folder of its own making.
TEST(StagedMark, FirstMarkMakesTheHubLayoutsFolder) {
  TempDir dir;
  const std::string cache = dir.path() + "/hub";
  fs::create_directories(cache);
  auto t = Local();
  RunOk(t.get(), WriteStagedMarkScript({cache, kRepo, kRev}));
  EXPECT_TRUE(fs::exists(cache + "/" + HubRepoDirName(kRepo) + "/.fleet-staged/" + kRev));
  EXPECT_FALSE(fs::exists(dir.path() + "/" + HubRepoDirName(kRepo)));
}

}  // namespace
}  // namespace fleet
