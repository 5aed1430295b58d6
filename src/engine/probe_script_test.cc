#include "src/engine/probe_script.h"

#include <gtest/gtest.h>

#include "src/provider.h"
#include "src/transport.h"

namespace fleet {
namespace {

// Runs `fragments` framed by BuildProbeScript in a local shell.
std::map<std::string, ProbeSection> RunFramed(const std::vector<ProbeFragment>& fragments) {
  SshEndpoint local;
  local.node = "a";
  local.address = "local";
  auto t = MakeTransport(local);
  EXPECT_TRUE(t->Connect().ok());
  auto r = t->Run(BuildProbeScript(fragments, "n0nce"));
  EXPECT_TRUE(r.ok()) << r.status().message();
  return r.ok() ? SplitProbeOutput(r->out, "n0nce") : std::map<std::string, ProbeSection>{};
}

TEST(ProbeScriptTest, SplitsOutputPerResource) {
  auto sections = RunFramed({
      {"node.a", "echo hostname=a"},
      {"display_ram.a", "printf 'no newline'"},
      {"image.x@a", "echo one; echo two; false"},
      {"model.y@a", "# a comment and nothing else"},
  });
  ASSERT_EQ(sections.size(), 4u);
  EXPECT_EQ(sections["node.a"].output, "hostname=a\n");
  EXPECT_EQ(sections["node.a"].exit_code, 0);
  EXPECT_EQ(sections["display_ram.a"].output, "no newline");
  // A fragment's exit status is its last command's.
  EXPECT_EQ(sections["image.x@a"].output, "one\ntwo\n");
  EXPECT_EQ(sections["image.x@a"].exit_code, 1);
  EXPECT_EQ(sections["model.y@a"].output, "");
  EXPECT_EQ(sections["model.y@a"].exit_code, 0);
}

TEST(ProbeScriptTest, FragmentsShareOneShellWithNoArguments) {
  // The same parent for a command in each fragment: no subshell (a fork)
  // between them. Each starts with no positional parameters.
  auto sections = RunFramed({
      {"a", "sh -c 'echo $PPID'; set -- x y; echo \"$#\""},
      {"b", "sh -c 'echo $PPID'; echo \"$#\""},
  });
  ASSERT_EQ(sections.size(), 2u);
  const std::string a = sections["a"].output, b = sections["b"].output;
  ASSERT_EQ(a.substr(a.find('\n') + 1), "2\n");
  EXPECT_EQ(b.substr(b.find('\n') + 1), "0\n");
  EXPECT_EQ(a.substr(0, a.find('\n')), b.substr(0, b.find('\n')));
}

TEST(ProbeScriptTest, AnExitEndsTheProbeUnlessInASubshell) {
  auto sections = RunFramed({
      {"image.x@a", ProbeInSubshell("echo one; exit 3")},
      {"model.y@a", "echo two; exit 0"},
      {"gateway.z@a", "echo never"},
  });
  EXPECT_EQ(sections["image.x@a"].output, "one\n");
  EXPECT_EQ(sections["image.x@a"].exit_code, 3);
  // The exit ended the shell: no end marker, nothing after it.
  EXPECT_EQ(sections["model.y@a"].output, "two\n");
  EXPECT_EQ(sections["model.y@a"].exit_code, -1);
  EXPECT_EQ(sections.count("gateway.z@a"), 0u);
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
