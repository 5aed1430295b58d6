#include "providers/model/fabric_copy.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "providers/model/blob_hash.h"
#include "providers/model/hub_test_util.h"
#include "src/shell_quote.h"

namespace fleet {
namespace {

using model_copy_internal::Paths;
using model_copy_internal::TargetPaths;
using testing_hub::ReadFile;
using testing_hub::TempDir;

// Runs `cmd` under /bin/sh with $m and $r set (TargetPrelude's names) and
// `data` on its stdin; returns its stdout.
std::string RunWriter(const std::string& dir, const std::string& cmd, const std::string& data) {
  const std::string in = dir + "/stdin";
  std::ofstream(in, std::ios::binary) << data;
  const std::string script = "m=" + ShellQuote(dir + "/m") + "; r=rev; mkdir -p \"$m/blobs\" " +
                             "\"$m/snapshots/$r\"\n" + cmd;
  FILE* p = ::popen(("sh -c " + ShellQuote(script) + " < " + ShellQuote(in)).c_str(), "r");
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  EXPECT_EQ(::pclose(p), 0) << cmd;
  return out;
}

// An LFS blob (sha256) and a git blob (git's sha1 of "blob N\0" + data):
// the writer leaves the bytes in the .incomplete file and prints the hash
// that names the blob; a stream that is not the blob's is told apart.
TEST(HashingWriter, WritesTheFileAndHashesWhatArrived) {
  TempDir dir;
  const std::string weights(3 << 20, 'w');
  const std::string config = "{\"hidden_size\": 64}\n";
  for (const auto& [path, data, kind] :
       {std::tuple{"model.safetensors", weights, BlobHashKind::kSha256},
        std::tuple{"config.json", config, BlobHashKind::kGitSha1}}) {
    const CopyItem item{path, data.size(), HashBlobData(kind, data), 0};
    const Paths p = TargetPaths(item);
    const std::string out = RunWriter(dir.path(), HashingWriterCommand(p, item), data);
    EXPECT_EQ(StreamHashProblem(out, item), "") << path << ": " << out;
    EXPECT_EQ(ReadFile(dir.path() + "/m/blobs/" + item.blob + ".incomplete"), data) << path;

    const std::string other = RunWriter(dir.path(), HashingWriterCommand(p, item), data + "x");
    EXPECT_NE(StreamHashProblem(other, item).find("not its blob name"), std::string::npos) << path;
  }
}

// A file without a blob name is written as it comes, and nothing is checked.
TEST(HashingWriter, AFileWithoutABlobNameIsWrittenAsIs) {
  TempDir dir;
  const CopyItem item{"README.md", 6, "", 0};
  const Paths p = TargetPaths(item);
  EXPECT_EQ(RunWriter(dir.path(), HashingWriterCommand(p, item), "hello\n"), "");
  EXPECT_EQ(ReadFile(dir.path() + "/m/snapshots/rev/README.md.incomplete"), "hello\n");
  EXPECT_EQ(StreamHashProblem("", item), "");
}

}  // namespace
}  // namespace fleet
