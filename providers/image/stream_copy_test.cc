// TarStreamCheck on real tar output, and StreamCopy between two local
// transports: whole copies, truncated streams (with the source exiting 0),
// failing sources, targets that stop early (no hang), slow sources.
#include "providers/image/stream_copy.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "providers/image/tar_stream_check.h"
#include "src/shell_quote.h"
#include "tests/support/temp_dir.h"

namespace fleet {
namespace {

class StreamCopyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NE(dir_, "");
    // An archive with a few entries, one of them 3 MiB (several chunks), a
    // symlink and a directory, as `podman save` writes them.
    Sh("mkdir -p " + Q(dir_ + "/src/sub") + " && head -c 3145728 /dev/urandom > " +
       Q(dir_ + "/src/sub/layer.tar") + " && echo '{}' > " + Q(dir_ + "/src/manifest.json") +
       " && ln -s sub/layer.tar " + Q(dir_ + "/src/link") + " && tar -C " + Q(dir_ + "/src") +
       " -cf " + Q(dir_ + "/a.tar") + " .");
    SshEndpoint e;
    e.node = "src";
    e.address = "local";
    source_ = MakeTransport(e);
    e.node = "dst";
    target_ = MakeTransport(e);
  }

  static std::string Q(const std::string& s) { return ShellQuote(s); }
  static void Sh(const std::string& cmd) { ASSERT_EQ(system(cmd.c_str()), 0) << cmd; }
  std::string Read(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }

  const testing_support::TempDir tmp_{"stream_copy_test"};
  const std::string dir_ = tmp_.path();
  std::unique_ptr<Transport> source_, target_;
};

TEST_F(StreamCopyTest, TarCheckAcceptsWholeArchivesOnly) {
  const std::string tar = Read(dir_ + "/a.tar");
  ASSERT_GT(tar.size(), 3u << 20);
  for (size_t piece : {size_t{1}, size_t{511}, size_t{512}, size_t{32768}, tar.size()}) {
    TarStreamCheck c;
    for (size_t i = 0; i < tar.size(); i += piece) c.Feed(std::string_view(tar).substr(i, piece));
    EXPECT_TRUE(c.complete()) << piece << ": " << c.Problem();
    EXPECT_GE(c.entries(), 4u);
  }
  // Cut anywhere, including right before the end marker or inside it.
  std::string gnu_end = tar;
  while (gnu_end.size() >= 1024 &&
         gnu_end.compare(gnu_end.size() - 1024, 1024, std::string(1024, '\0')) == 0)
    gnu_end.resize(gnu_end.size() - 512);           // strip the zero padding...
  const size_t content_end = gnu_end.size() - 512;  // ...to just before the marker
  for (size_t cut :
       {size_t{0}, size_t{100}, size_t{512}, size_t{700000}, content_end, content_end + 512}) {
    TarStreamCheck c;
    c.Feed(std::string_view(tar).substr(0, cut));
    EXPECT_FALSE(c.complete()) << cut;
    EXPECT_FALSE(c.Problem().empty()) << cut;
  }
  // A corrupted header is caught by its checksum.
  std::string bad = tar;
  bad[10] ^= 0x55;
  TarStreamCheck c;
  c.Feed(bad);
  EXPECT_FALSE(c.complete());
  EXPECT_NE(c.Problem().find("checksum"), std::string::npos);
  // Data after the end marker is not a tar stream any more.
  TarStreamCheck d;
  d.Feed(tar + "trailing");
  EXPECT_FALSE(d.complete());
}

TEST_F(StreamCopyTest, CopiesWholeStream) {
  StreamCopyOptions o;
  uint64_t reported = 0;
  o.progress_every = 1 << 20;
  o.on_progress = [&](uint64_t b) { reported = b; };
  o.queue_bytes = 256 << 10;  // small queue: back-pressure on the source
  StreamCopyResult r = StreamCopy(source_.get(), "cat " + Q(dir_ + "/a.tar"), target_.get(),
                                  "cat > " + Q(dir_ + "/b.tar"), o);
  EXPECT_TRUE(r.ok()) << r.Problem();
  EXPECT_EQ(Read(dir_ + "/a.tar"), Read(dir_ + "/b.tar"));
  EXPECT_EQ(r.bytes, Read(dir_ + "/a.tar").size());
  EXPECT_GT(reported, 0u);
}

TEST_F(StreamCopyTest, TruncatedStreamFromASourceThatExitsZeroIsNotOk) {
  StreamCopyResult r = StreamCopy(source_.get(), "head -c 1000000 " + Q(dir_ + "/a.tar"),
                                  target_.get(), "cat > /dev/null");
  ASSERT_TRUE(r.source.ok());
  EXPECT_EQ(r.source->exit_code, 0);
  EXPECT_FALSE(r.ok());
  EXPECT_NE(r.Problem().find("stopped after 1000000 bytes"), std::string::npos) << r.Problem();
}

TEST_F(StreamCopyTest, FailingSourceIsNotOk) {
  StreamCopyResult r = StreamCopy(source_.get(), "cat " + Q(dir_ + "/a.tar") + "; exit 3",
                                  target_.get(), "cat > /dev/null");
  EXPECT_FALSE(r.ok());
  EXPECT_NE(r.Problem().find("source exited 3"), std::string::npos) << r.Problem();
}

TEST_F(StreamCopyTest, TargetStoppingEarlyStopsTheSourceWithoutHanging) {
  StreamCopyOptions o;
  o.queue_bytes = 64 << 10;
  // An endless source; the target reads 10 bytes and fails.
  StreamCopyResult r = StreamCopy(source_.get(), "yes", target_.get(),
                                  "head -c 10 >/dev/null; echo 'load failed' >&2; exit 125", o);
  EXPECT_FALSE(r.ok());
  EXPECT_NE(r.Problem().find("target exited 125: load failed"), std::string::npos) << r.Problem();
}

TEST_F(StreamCopyTest, SlowSourceStillArrives) {
  StreamCopyResult r = StreamCopy(source_.get(), "sleep 1; cat " + Q(dir_ + "/a.tar"),
                                  target_.get(), "cat > " + Q(dir_ + "/c.tar"));
  EXPECT_TRUE(r.ok()) << r.Problem();
  EXPECT_EQ(Read(dir_ + "/a.tar"), Read(dir_ + "/c.tar"));
}

}  // namespace
}  // namespace fleet
