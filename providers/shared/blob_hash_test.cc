#include "providers/shared/blob_hash.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "providers/shared/hub_test_util.h"

namespace fleet {
namespace {

using testing_hub::TempDir;
using testing_hub::WriteFile;

const std::string kEmptySha256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

// Bytes that differ from one MiB to the next, so that a window or a step
// hashed twice or skipped changes the digest.
std::string Pattern(size_t size) {
  std::string data(size, '\0');
  for (size_t i = 0; i < size; ++i) data[i] = static_cast<char>((i * 2654435761u) >> 13);
  return data;
}

// The files are mapped 64 MiB at a time and hashed in 8 MiB steps: a file
// past one window, a small git blob and an empty one each get their own
// digest on 2 threads, and the progress counts every byte once.
TEST(BlobHash, HashLocalFilesMapsFilesPastTheWindow) {
  TempDir dir;
  const std::string big = Pattern((size_t{64} << 20) + (size_t{8} << 20) + 12345);
  const std::string config = R"({"hidden_size": 64})";
  WriteFile(dir.path() + "/big", big);
  WriteFile(dir.path() + "/config.json", config);
  WriteFile(dir.path() + "/empty", "");
  const std::vector<LocalHashJob> jobs = {
      {dir.path() + "/big", HashBlobData(BlobHashKind::kSha256, big)},
      {dir.path() + "/config.json", HashBlobData(BlobHashKind::kGitSha1, config)},
      {dir.path() + "/empty", kEmptySha256}};
  std::atomic<uint64_t> done{0};
  std::vector<LocalHashResult> results = HashLocalFiles(jobs, 2, &done);
  ASSERT_EQ(results.size(), 3u);
  for (const LocalHashResult& r : results) EXPECT_TRUE(r.ok()) << r.path << ": " << r.error;
  EXPECT_EQ(done.load(), big.size() + config.size());
  // One flipped byte past the first window: a mismatch, no error.
  std::string flipped = big;
  flipped[(size_t{64} << 20) + 7] ^= 1;
  WriteFile(dir.path() + "/big", flipped);
  results = HashLocalFiles({jobs[0]}, 1);
  EXPECT_FALSE(results[0].ok());
  EXPECT_EQ(results[0].error, "");
  EXPECT_EQ(results[0].digest, HashBlobData(BlobHashKind::kSha256, flipped));
}

// What cannot be mapped is an error for that file: missing, a directory, a
// FIFO (without blocking on it); the other files are still hashed.
TEST(BlobHash, HashLocalFilesRefusesWhatIsNotARegularFile) {
  TempDir dir;
  WriteFile(dir.path() + "/abc", "abc");
  ASSERT_EQ(mkfifo((dir.path() + "/fifo").c_str(), 0600), 0);
  const std::string abc = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
  std::vector<LocalHashResult> results = HashLocalFiles({{dir.path() + "/missing", abc},
                                                         {dir.path(), abc},
                                                         {dir.path() + "/fifo", abc},
                                                         {dir.path() + "/abc", abc}},
                                                        2);
  ASSERT_EQ(results.size(), 4u);
  EXPECT_EQ(results[0].error.rfind("cannot open: No such file", 0), 0u) << results[0].error;
  EXPECT_EQ(results[1].error, "cannot hash: not a regular file");
  EXPECT_EQ(results[2].error, "cannot hash: not a regular file");
  EXPECT_TRUE(results[3].ok()) << results[3].error;
}

// A file cut short while it is mapped raises SIGBUS in the hashing thread:
// an error for that file, not the end of the process.
TEST(BlobHash, HashLocalFilesSurvivesAFileTruncatedWhileHashed) {
  TempDir dir;
  const std::string path = dir.path() + "/shrinks";
  const std::string data = Pattern(size_t{256} << 20);
  WriteFile(path, data);
  std::atomic<uint64_t> done{0};
  std::thread cut([&] {
    while (done.load() == 0) std::this_thread::yield();
    ASSERT_EQ(truncate(path.c_str(), 4096), 0);
  });
  std::vector<LocalHashResult> results =
      HashLocalFiles({{path, HashBlobData(BlobHashKind::kSha256, data)}}, 1, &done);
  cut.join();
  ASSERT_EQ(results.size(), 1u);
  EXPECT_FALSE(results[0].ok());
  EXPECT_TRUE(results[0].error == "the file shrank while it was hashed" ||
              results[0].error == "the file changed size while it was hashed")
      << results[0].error;
}

}  // namespace
}  // namespace fleet
