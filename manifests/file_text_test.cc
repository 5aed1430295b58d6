#include "manifests/file_text.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <vector>

#include "manifests/manifest.h"
#include "manifests/own_fault.h"
#include "tests/support/temp_dir.h"

namespace fleet {
namespace {

// Uses up every descriptor below a lowered soft limit, runs `f`, and gives
// them back: what a flood of the metrics port did to the watch.
template <typename F>
void WithoutDescriptors(F f) {
  rlimit old{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &old), 0);
  rlimit low = old;
  low.rlim_cur = 64;
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &low), 0);
  std::vector<int> held;
  for (int fd; (fd = open("/dev/null", O_RDONLY | O_CLOEXEC)) >= 0;) held.push_back(fd);
  ASSERT_EQ(errno, EMFILE);
  f();
  for (int fd : held) close(fd);
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &old), 0);
}

TEST(ReadFileText, ReadsTheWholeFile) {
  const testing_support::TempDir tmp("file_text_test");
  const std::string& dir = tmp.path();
  std::ofstream(dir + "/a") << std::string(200000, 'x');
  FileText f = ReadFileText(dir + "/a", "a");
  EXPECT_TRUE(f.ok);
  EXPECT_EQ(f.text.size(), 200000u);
  std::ofstream(dir + "/empty");
  f = ReadFileText(dir + "/empty", "empty");
  EXPECT_TRUE(f.ok);
  EXPECT_EQ(f.text, "");
}

TEST(ReadFileText, AMissingFileNamesItsErrnoAndIsNotOwn) {
  FileText f = ReadFileText("/nonexistent/x.toml", "recipe x.toml");
  EXPECT_FALSE(f.ok);
  EXPECT_EQ(f.error_no, ENOENT);
  EXPECT_FALSE(f.own_fault);
  EXPECT_EQ(f.error, "cannot open recipe x.toml: No such file or directory (ENOENT)");
}

TEST(ReadFileText, NoDescriptorLeftIsAnErrorOfTheReaderNeverAnEmptyFile) {
  const testing_support::TempDir tmp("file_text_test");
  const std::string& dir = tmp.path();
  std::ofstream(dir + "/fleet.yaml") << "version: 1\n";
  const uint64_t before = OwnFaultCount();
  WithoutDescriptors([&] {
    FileText f = ReadFileText(dir + "/fleet.yaml", "fleet.yaml");
    EXPECT_FALSE(f.ok);
    EXPECT_TRUE(f.own_fault);
    EXPECT_EQ(f.error_no, EMFILE);
    EXPECT_EQ(f.text, "");
    EXPECT_EQ(f.error, "cannot open fleet.yaml: Too many open files (EMFILE)");
  });
  EXPECT_GT(OwnFaultCount(), before);
}

TEST(LoadManifest, NoDescriptorLeftIsNotAnEmptyFleetYaml) {
  const testing_support::TempDir tmp("file_text_test");
  const std::string& dir = tmp.path();
  std::ofstream(dir + "/fleet.yaml") << "version: 1\nfleet: lab\n";
  Manifest m;
  Diagnostics diags;
  bool loaded = true;
  WithoutDescriptors([&] { loaded = LoadManifest(dir, &m, &diags); });
  EXPECT_FALSE(loaded);
  ASSERT_FALSE(diags.empty());
  EXPECT_TRUE(diags[0].own_fault);
  EXPECT_NE(diags[0].message.find("Too many open files (EMFILE)"), std::string::npos)
      << diags[0].message;
  EXPECT_EQ(diags[0].message.find("is empty"), std::string::npos) << diags[0].message;
}

TEST(IsOwnErrno, DescriptorsMemoryAndTheOwnNetworkNotThePeer) {
  for (int e : {EMFILE, ENFILE, ENOMEM, ENOBUFS, EADDRNOTAVAIL, ENETDOWN, ENETUNREACH})
    EXPECT_TRUE(IsOwnErrno(e)) << e;
  // The peer's answers: evidence about the serve.
  for (int e : {ECONNREFUSED, ETIMEDOUT, ECONNRESET, EHOSTUNREACH, ENOENT, EACCES})
    EXPECT_FALSE(IsOwnErrno(e)) << e;
}

}  // namespace
}  // namespace fleet
