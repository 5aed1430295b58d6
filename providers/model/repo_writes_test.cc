// The scripts that write into a repo folder (repo_writes.h), each on its
// own with the shared stub-CLI runner: what they write, and where they stop.
#include "providers/model/repo_writes.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "providers/shared/hub_cache.h"
#include "tests/support/stub_cli.h"

namespace fleet {
namespace {

namespace fs = std::filesystem;
using testing_support::ShellRun;
using testing_support::StubCli;

const std::string kRepo = "org/tiny";
const std::string kRev = "93d7ea55e731d3fe847a927d8a6a2853977d85d2";

TEST(RepoWrites, LinkBlobsLinksEachPathAndStopsAtAFailure) {
  const StubCli stub("link_blobs_test");
  const HubLocation loc{stub.dir() + "/hub", kRepo, kRev};
  const std::string m = loc.cache + "/" + HubRepoDirName(kRepo);
  stub.Write("hub/" + HubRepoDirName(kRepo) + "/blobs/aaa", "A");
  ShellRun run = stub.Run(LinkBlobsScript(
      loc, {{"sub/a.json", "../../../blobs/aaa"}, {"b 'x'.json", "../../blobs/aaa"}}));
  EXPECT_EQ(run.exit_code, 0);
  EXPECT_EQ(fs::read_symlink(m + "/snapshots/" + kRev + "/sub/a.json").string(),
            "../../../blobs/aaa");
  EXPECT_EQ(stub.Read("hub/" + HubRepoDirName(kRepo) + "/snapshots/" + kRev + "/b 'x'.json"), "A");

  // A file where a folder must go: exit 1, and the pairs after it untouched.
  stub.Write("hub/" + HubRepoDirName(kRepo) + "/snapshots/" + kRev + "/file", "");
  run = stub.Run(
      LinkBlobsScript(loc, {{"file/c.json", "../../../blobs/aaa"}, {"d.json", "../../blobs/aaa"}}));
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_FALSE(fs::is_symlink(m + "/snapshots/" + kRev + "/d.json"));
}

TEST(RepoWrites, WriteRefsInPlaceOrSwappedInTheLegacyFolder) {
  const StubCli stub("write_refs_test");
  const HubLocation loc{stub.dir() + "/hub", kRepo, kRev};
  const std::string refs = "hub/" + HubRepoDirName(kRepo) + "/refs/";
  ShellRun run = stub.Run(WriteRefsScript(loc, {{"main", kRev}, {"pr/1", "f00"}}, false));
  EXPECT_EQ(run.exit_code, 0);
  EXPECT_EQ(stub.Read(refs + "main"), kRev);  // no newline, as the Hub writes refs
  EXPECT_EQ(stub.Read(refs + "pr/1"), "f00");

  // The branch of a legacy-layout copy (beside the cache): written there,
  // through a temporary file that does not stay.
  const StubCli legacy("write_refs_test");
  fs::create_directories(legacy.dir() + "/" + HubRepoDirName(kRepo) + "/snapshots");
  fs::create_directories(legacy.dir() + "/hub");
  const HubLocation in_legacy{legacy.dir() + "/hub", kRepo, kRev};
  run = legacy.Run(WriteRefsScript(in_legacy, {{"main", kRev}}, true));
  EXPECT_EQ(run.exit_code, 0);
  EXPECT_EQ(legacy.Read(HubRepoDirName(kRepo) + "/refs/main"), kRev);
  EXPECT_FALSE(fs::exists(legacy.dir() + "/" + HubRepoDirName(kRepo) + "/refs/main.fleet-tmp"));
  EXPECT_FALSE(fs::exists(legacy.dir() + "/hub/" + HubRepoDirName(kRepo)));

  // refs/ a file: nothing can be written, exit 1.
  stub.Write("hub/" + HubRepoDirName("org/other") + "/refs", "");
  run = stub.Run(WriteRefsScript({loc.cache, "org/other", kRev}, {{"main", kRev}}, false));
  EXPECT_EQ(run.exit_code, 1);
  run = stub.Run(WriteRefsScript({loc.cache, "org/other", kRev}, {{"main", kRev}}, true));
  EXPECT_EQ(run.exit_code, 1);
}

TEST(RepoWrites, BlobBytesCountsBothLayoutsAndNothingAsZero) {
  const StubCli stub("blob_bytes_test");
  const HubLocation loc{stub.dir() + "/hub", kRepo, kRev};
  ShellRun run = stub.Run(BlobBytesScript(loc));
  EXPECT_EQ(run.exit_code, 0);
  EXPECT_EQ(run.out, "0\n");
  stub.Write("hub/" + HubRepoDirName(kRepo) + "/blobs/aaa", "12345");
  stub.Write("hub/" + HubRepoDirName(kRepo) + "/blobs/bbb.incomplete", "123");
  stub.Write("hub/" + HubRepoDirName(kRepo) + "/blobs/sub/ccc", "not counted");
  stub.Write(HubRepoDirName(kRepo) + "/blobs/ddd", "12");  // the legacy layout's
  run = stub.Run(BlobBytesScript(loc));
  EXPECT_EQ(run.out, "10\n");
}

}  // namespace
}  // namespace fleet
