#include "src/atomic_file.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace fleet {
namespace {

namespace fs = std::filesystem;

class AtomicFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/fleet_atomic_test_XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string Read(const std::string& path) {
    std::ifstream in(path);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  int Mode(const std::string& path) {
    struct stat st {};
    EXPECT_EQ(::stat(path.c_str(), &st), 0);
    return static_cast<int>(st.st_mode & 07777);
  }
  int Entries() {
    int n = 0;
    for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir_)) ++n;
    return n;
  }
  std::string dir_;
};

TEST_F(AtomicFileTest, ReplacesTheFileWithItsModeAndLeavesNoTemp) {
  const std::string path = dir_ + "/state.json";
  bool renamed = false;
  ASSERT_TRUE(WriteFileAtomic(path, "one", {}, &renamed).ok());
  EXPECT_TRUE(renamed);
  EXPECT_EQ(Read(path), "one");
  EXPECT_EQ(Mode(path), 0600);
  AtomicWriteOptions o;
  o.mode = 0644;
  o.unique_temp = true;
  ASSERT_TRUE(WriteFileAtomic(path, "two", o).ok());
  EXPECT_EQ(Read(path), "two");
  EXPECT_EQ(Mode(path), 0644);
  EXPECT_EQ(Entries(), 1);
}

TEST_F(AtomicFileTest, AFailureBeforeTheRenameLeavesTheOldFile) {
  const std::string path = dir_ + "/plan.json";
  ASSERT_TRUE(WriteFileAtomic(path, "old").ok());
  AtomicWriteOptions o;
  bool durable = false;
  o.before_rename = [&] {
    durable = true;
    return Status::Error("no backup");
  };
  bool renamed = true;
  Status s = WriteFileAtomic(path, "new", o, &renamed);
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.message(), "no backup");
  EXPECT_TRUE(durable);
  EXPECT_FALSE(renamed);
  EXPECT_EQ(Read(path), "old");
  EXPECT_EQ(Entries(), 1);
}

TEST_F(AtomicFileTest, AMissingDirectoryIsNamed) {
  Status s = WriteFileAtomic(dir_ + "/none/x", "data");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("create " + dir_ + "/none/x.tmp."), std::string::npos) << s.message();
}

}  // namespace
}  // namespace fleet
