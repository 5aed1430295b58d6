#include "providers/model/fabric_copy.h"

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "providers/shared/blob_hash.h"
#include "providers/shared/hub_test_util.h"
#include "src/shell_quote.h"
#include "tests/support/run_shell.h"

namespace fleet {
namespace {

using model_copy_internal::CopyOnNodeCommand;
using model_copy_internal::CopyWriterCommand;
using model_copy_internal::FinishScript;
using model_copy_internal::Paths;
using model_copy_internal::TargetPaths;
using testing_hub::ReadFile;
using testing_hub::TempDir;

// A PATH of the tools the node scripts use, without openssl: a node that
// lacks it hashes with coreutils.
std::string PathWithoutOpenssl(const std::string& dir) {
  const std::string bin = dir + "/bin-no-openssl";
  std::string cmd = "mkdir -p " + bin;
  for (const char* tool : {"sh", "tee", "sha256sum", "sha1sum", "cat", "mkdir", "rm", "dirname"})
    cmd += std::string(" && ln -sf \"$(command -v ") + tool + ")\" " + bin + "/" + tool;
  EXPECT_EQ(std::system(cmd.c_str()), 0);
  return bin;
}

// Runs `cmd` under /bin/sh with $m and $r set (TargetPrelude's names) and
// `data` on its stdin (PATH=`path` when given); returns its stdout. `rc`:
// the exit status it must have.
std::string RunWriter(const std::string& dir, const std::string& cmd, const std::string& data,
                      const std::string& path = "", int rc = 0) {
  const std::string in = dir + "/stdin";
  std::ofstream(in, std::ios::binary) << data;
  const std::string script = (path.empty() ? "" : "PATH=" + ShellQuote(path) + "\n") +
                             "m=" + ShellQuote(dir + "/m") + "; r=rev; mkdir -p \"$m/blobs\" " +
                             "\"$m/snapshots/$r\"\n" + cmd;
  const testing_support::ShellRun run =
      testing_support::RunShell("sh -c " + ShellQuote(script) + " < " + ShellQuote(in));
  EXPECT_EQ(run.exit_code, rc) << cmd;
  return run.out;
}

// An LFS blob (sha256) and a git blob (git's sha1 of "blob N\0" + data):
// the writer leaves the bytes in the .incomplete file and prints the hash
// that names the blob; a stream that is not the blob's is told apart.
// With openssl on the node and without it.
TEST(HashingWriter, WritesTheFileAndHashesWhatArrived) {
  TempDir dir;
  const std::string weights(3 << 20, 'w');
  const std::string config = "{\"hidden_size\": 64}\n";
  for (const std::string& path_env : {std::string(), PathWithoutOpenssl(dir.path())}) {
    for (const auto& [path, data, kind] :
         {std::tuple{"model.safetensors", weights, BlobHashKind::kSha256},
          std::tuple{"config.json", config, BlobHashKind::kGitSha1}}) {
      const CopyItem item{path, data.size(), HashBlobData(kind, data), 0};
      const Paths p = TargetPaths(item);
      const std::string out = RunWriter(dir.path(), HashingWriterCommand(p, item), data, path_env);
      EXPECT_EQ(StreamHashProblem(out, item), "") << path << " " << path_env << ": " << out;
      EXPECT_EQ(ReadFile(dir.path() + "/m/blobs/" + item.blob + ".incomplete"), data) << path;

      const std::string other =
          RunWriter(dir.path(), HashingWriterCommand(p, item), data + "x", path_env);
      EXPECT_NE(StreamHashProblem(other, item).find("not its blob name"), std::string::npos)
          << path << " " << path_env;
    }
  }
}

// The check of a finished .incomplete file: kept when it hashes to its
// blob name, removed when not; with openssl on the node and without it.
TEST(VerifyOnTarget, KeepsAMatchAndRemovesAMismatch) {
  TempDir dir;
  const std::string data(1 << 20, 'v');
  const CopyItem item{"model.safetensors", data.size(), HashBlobData(BlobHashKind::kSha256, data),
                      0};
  const Paths p = TargetPaths(item);
  const std::string inc = dir.path() + "/m/blobs/" + item.blob + ".incomplete";
  for (const std::string& path_env : {std::string(), PathWithoutOpenssl(dir.path())}) {
    RunWriter(dir.path(), "cat > " + p.inc, data, path_env);
    RunWriter(dir.path(), VerifyOnTargetScript(p, item), "", path_env);
    EXPECT_EQ(ReadFile(inc), data) << path_env;
    RunWriter(dir.path(), "cat > " + p.inc, data + "x", path_env);
    RunWriter(dir.path(), VerifyOnTargetScript(p, item), "", path_env, 1);
    EXPECT_FALSE(std::ifstream(inc).good()) << path_env << ": a mismatch is removed";
  }
}

// copy_verify.sh for a git blob: git's sha1 of "blob SIZE\0" and the bytes.
TEST(VerifyOnTarget, ChecksAGitBlobsHash) {
  TempDir dir;
  const std::string data = "{\"hidden_size\": 64}\n";
  const CopyItem item{"config.json", data.size(), HashBlobData(BlobHashKind::kGitSha1, data), 0};
  const Paths p = TargetPaths(item);
  const std::string inc = dir.path() + "/m/blobs/" + item.blob + ".incomplete";
  RunWriter(dir.path(), "cat > " + p.inc, data);
  RunWriter(dir.path(), VerifyOnTargetScript(p, item), "");
  EXPECT_EQ(ReadFile(inc), data);
  RunWriter(dir.path(), "cat > " + p.inc, "{\"hidden_size\": 65}\n");
  RunWriter(dir.path(), VerifyOnTargetScript(p, item), "", "", 1);
  EXPECT_FALSE(std::filesystem::exists(inc)) << "a mismatch is removed";
}

// copy_finish.sh: a file of another size than expected stays .incomplete;
// one of the right size takes its blob's name, and the snapshot's path (in
// a subfolder it makes) links to the blob relatively. A file without a
// blob name takes the snapshot's path itself.
TEST(FinishOnTarget, RenamesLinksAndRefusesAFileOfAnotherSize) {
  TempDir dir;
  const std::string data = "{\"hidden_size\": 64}\n";
  const CopyItem item{"sub/config.json", data.size(), HashBlobData(BlobHashKind::kGitSha1, data),
                      0};
  const Paths p = TargetPaths(item);
  const std::string m = dir.path() + "/m";
  const std::string inc = m + "/blobs/" + item.blob + ".incomplete";
  RunWriter(dir.path(), "cat > " + p.inc, data.substr(1));
  RunWriter(dir.path(), FinishScript(p, item), "", "", 1);
  EXPECT_EQ(ReadFile(inc), data.substr(1));
  EXPECT_FALSE(std::filesystem::exists(m + "/blobs/" + item.blob));

  RunWriter(dir.path(), "cat > " + p.inc, data);
  RunWriter(dir.path(), VerifyOnTargetScript(p, item) + FinishScript(p, item), "");
  EXPECT_FALSE(std::filesystem::exists(inc));
  EXPECT_EQ(ReadFile(m + "/blobs/" + item.blob), data);
  EXPECT_EQ(std::filesystem::read_symlink(m + "/snapshots/rev/sub/config.json").string(), p.rel);
  EXPECT_EQ(ReadFile(m + "/snapshots/rev/sub/config.json"), data);

  const CopyItem plain{"README.md", 6, "", 0};
  const Paths q = TargetPaths(plain);
  RunWriter(dir.path(), "cat > " + q.inc, "hello\n");
  EXPECT_EQ(VerifyOnTargetScript(q, plain), "");
  RunWriter(dir.path(), FinishScript(q, plain), "");
  EXPECT_EQ(ReadFile(m + "/snapshots/rev/README.md"), "hello\n");
  EXPECT_FALSE(std::filesystem::is_symlink(m + "/snapshots/rev/README.md"));
}

// copy_writer.sh: a copy from byte 0 starts the file afresh (whatever a
// failed try left), a resumed one appends; the folders are made.
TEST(CopyWriter, StartsAfreshOrAppends) {
  TempDir dir;
  const std::string inc = dir.path() + "/m/snapshots/rev/sub/notes.txt.incomplete";
  CopyItem item{"sub/notes.txt", 10, "", 0};
  const Paths p = TargetPaths(item);
  RunWriter(dir.path(), CopyWriterCommand(p, item), "stale");
  RunWriter(dir.path(), CopyWriterCommand(p, item), "hello");
  EXPECT_EQ(ReadFile(inc), "hello");
  item.offset = 5;
  RunWriter(dir.path(), CopyWriterCommand(p, item), "world");
  EXPECT_EQ(ReadFile(inc), "helloworld");
}

// copy_on_node.sh: the source's file whole, or its tail after what a cut
// copy left; a source that is not there fails the copy.
TEST(CopyOnNode, CopiesWholeOrTheRestAndFailsWithoutTheSource) {
  TempDir dir;
  const std::string from = ShellQuote(dir.path() + "/src/a.bin");
  const std::string inc = dir.path() + "/m/snapshots/rev/a.bin.incomplete";
  RunWriter(dir.path(), "mkdir -p " + ShellQuote(dir.path() + "/src") + " && cat > " + from,
            "0123456789");
  CopyItem item{"a.bin", 10, "", 0};
  const Paths p = TargetPaths(item);
  RunWriter(dir.path(), CopyOnNodeCommand(from, p, item), "");
  EXPECT_EQ(ReadFile(inc), "0123456789");
  RunWriter(dir.path(), "printf 0123 > " + p.inc, "");
  item.offset = 4;
  RunWriter(dir.path(), CopyOnNodeCommand(from, p, item), "");
  EXPECT_EQ(ReadFile(inc), "0123456789");
  item.offset = 0;
  RunWriter(dir.path(), CopyOnNodeCommand(ShellQuote(dir.path() + "/src/gone.bin"), p, item), "",
            "", 1);
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
