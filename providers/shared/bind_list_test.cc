#include "providers/shared/bind_list.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include "providers/shared/hub_test_util.h"

namespace fleet {
namespace {

using namespace testing_hub;  // NOLINT

// No component of `path` is a symlink and it is a regular file.
void ExpectRealFile(const std::string& path) {
  ASSERT_FALSE(path.empty());
  ASSERT_EQ(path[0], '/');
  std::string prefix;
  size_t pos = 1;
  while (pos <= path.size()) {
    size_t next = path.find('/', pos);
    if (next == std::string::npos) next = path.size();
    prefix = path.substr(0, next);
    struct stat st;
    ASSERT_EQ(lstat(prefix.c_str(), &st), 0) << prefix;
    EXPECT_FALSE(S_ISLNK(st.st_mode)) << prefix << " (in " << path << ") is a symlink";
    pos = next + 1;
  }
  struct stat st;
  ASSERT_EQ(lstat(path.c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode)) << path;
}

TEST(BindList, BuildChecksEveryFile) {
  std::vector<ResolvedFile> ok = {{"config.json", "/srv/hf/hub/m/blobs/a", true},
                                  {"sub/x.safetensors", "/srv/hf/hub/m/blobs/b", true}};
  Result<std::vector<BindMount>> l = BuildBindList(ok, "/srv/hf/hub/m/snapshots/r", "/model");
  ASSERT_TRUE(l.ok()) << l.status().message();
  EXPECT_EQ(FormatBindList(*l),
            "/srv/hf/hub/m/blobs/a\t/model/config.json\n"
            "/srv/hf/hub/m/blobs/b\t/model/sub/x.safetensors\n");
  l = BuildBindList(ok, "/srv/hf/hub/m/snapshots/r", "");
  ASSERT_TRUE(l.ok());
  EXPECT_EQ((*l)[1].container, "/srv/hf/hub/m/snapshots/r/sub/x.safetensors");

  EXPECT_FALSE(BuildBindList({{"a", "", false}}, "/s", "/model").ok());           // broken
  EXPECT_FALSE(BuildBindList({{"a", "/dev/null", false}}, "/s", "/model").ok());  // not a file
  EXPECT_FALSE(BuildBindList({{"a", "blobs/x", true}}, "/s", "/model").ok());     // relative
  EXPECT_FALSE(BuildBindList({{"../a", "/x", true}}, "/s", "/model").ok());       // escapes
  EXPECT_FALSE(BuildBindList({{"a", "/x", true}}, "/s", "model").ok());           // root
  EXPECT_FALSE(BuildBindList({}, "/s", "/model").ok());                           // empty
  Result<std::vector<BindMount>> broken =
      BuildBindList({{"model.safetensors", "", false}}, "/s", "");
  EXPECT_NE(broken.status().message().find("model.safetensors: does not resolve"),
            std::string::npos);
}

TEST(BindList, RealLayoutResolvesToBlobsWithNoSymlink) {
  TempDir dir;
  const std::string cache = dir.path() + "/hub";
  auto files = ThreeShardModel();
  files["draft/model.safetensors"] = Safetensors("draft.w", 2, 16);
  WriteHubModel(cache, kRepo, kRev, files);
  auto t = Local();
  Result<std::vector<BindMount>> l = ModelBindList(t.get(), cache, kRepo, kRev, "/model");
  ASSERT_TRUE(l.ok()) << l.status().message();
  ASSERT_EQ(l->size(), files.size());
  size_t i = 0;
  for (const auto& [path, data] : files) {  // sorted like the list
    const BindMount& b = (*l)[i++];
    EXPECT_EQ(b.container, "/model/" + path);
    ExpectRealFile(b.host);
    EXPECT_NE(b.host.find("/blobs/"), std::string::npos) << b.host;
    EXPECT_EQ(ReadFile(b.host), data) << path;
  }
}

TEST(BindList, LegacyLayoutBehindARelativeLinkStillResolves) {
  TempDir dir;
  const std::string cache = dir.path() + "/hf-local/hub";
  fs::create_directories(cache);
  const std::string legacy = dir.path() + "/hf-local/" + HubRepoDirName(kRepo);
  WriteHubModel(cache, kRepo, kRev, ThreeShardModel(), legacy);
  fs::create_symlink("../" + HubRepoDirName(kRepo), cache + "/" + HubRepoDirName(kRepo));
  auto t = Local();
  Result<std::vector<BindMount>> l = ModelBindList(t.get(), cache, kRepo, kRev, "");
  ASSERT_TRUE(l.ok()) << l.status().message();
  for (const BindMount& b : *l) {
    ExpectRealFile(b.host);
    EXPECT_EQ(b.host.rfind(fs::canonical(legacy).string() + "/blobs/", 0), 0u) << b.host;
    // Mounted at the hub path the loader expects.
    EXPECT_EQ(
        b.container.rfind(cache + "/" + HubRepoDirName(kRepo) + "/snapshots/" + kRev + "/", 0), 0u)
        << b.container;
  }
}

TEST(BindList, BrokenLinkFailsNamingTheFile) {
  TempDir dir;
  const std::string cache = dir.path() + "/hub";
  WriteHubModel(cache, kRepo, kRev, ThreeShardModel());
  const std::string snap = cache + "/" + HubRepoDirName(kRepo) + "/snapshots/" + kRev + "/";
  fs::remove(fs::canonical(snap + "config.json"));
  auto t = Local();
  Result<std::vector<BindMount>> l = ModelBindList(t.get(), cache, kRepo, kRev, "/model");
  ASSERT_FALSE(l.ok());
  EXPECT_NE(l.status().message().find("config.json: does not resolve"), std::string::npos)
      << l.status().message();
  EXPECT_FALSE(
      ModelBindList(t.get(), cache, kRepo, "ffffffffffffffffffffffffffffffffffffffff", "").ok());
}

}  // namespace
}  // namespace fleet
