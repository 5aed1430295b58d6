#include "src/engine/probe_script.h"

#include <gtest/gtest.h>

#include "src/transport.h"

namespace fleet {
namespace {

TEST(ProbeScriptTest, SplitsOutputPerResource) {
  std::vector<ProbeFragment> f = {
      {"node.a", "echo hostname=a"},
      {"display_ram.a", "printf 'no newline'"},
      {"image.x@a", "echo one; echo two; exit 3"},
      {"model.y@a", "echo after-exit"},
  };
  SshEndpoint local;
  local.node = "a";
  local.address = "local";
  auto t = MakeTransport(local);
  ASSERT_TRUE(t->Connect().ok());
  auto r = t->Run(BuildProbeScript(f, "n0nce"));
  ASSERT_TRUE(r.ok()) << r.status().message();
  auto sections = SplitProbeOutput(r->out, "n0nce");
  ASSERT_EQ(sections.size(), 4u);
  EXPECT_EQ(sections["node.a"].output, "hostname=a\n");
  EXPECT_EQ(sections["node.a"].exit_code, 0);
  EXPECT_EQ(sections["display_ram.a"].output, "no newline");
  EXPECT_EQ(sections["image.x@a"].output, "one\ntwo\n");
  EXPECT_EQ(sections["image.x@a"].exit_code, 3);
  // An exit in one fragment does not cut the next one short.
  EXPECT_EQ(sections["model.y@a"].output, "after-exit\n");
}

TEST(ProbeScriptTest, ForgedMarkersWithoutNonceAreData) {
  std::string out = "\n@@fleet:n:begin:a\n@@fleet:other:end:a:0\nx\n\n@@fleet:n:end:a:0\n";
  auto sections = SplitProbeOutput(out, "n");
  EXPECT_EQ(sections["a"].output, "@@fleet:other:end:a:0\nx\n");
}

TEST(ProbeScriptTest, MissingEndMarkerMeansUnknownExit) {
  auto sections = SplitProbeOutput("\n@@fleet:n:begin:a\npartial\n", "n");
  EXPECT_EQ(sections["a"].exit_code, -1);
}

}  // namespace
}  // namespace fleet
