// The CUDA context decision, run for real: the node-side script under
// /bin/sh with a stand-in container CLI (and fleet-probe) on PATH.
#include "providers/node/gpu_context.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "providers/node/node_provider.h"
#include "providers/shared/gpu_facts.h"
#include "src/probe/fleet_probe_source.h"
#include "src/probe/probe_install.h"
#include "src/shell_quote.h"
#include "tests/support/stub_cli.h"

namespace fleet {
namespace {

class GpuContextTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_NE(dir_, ""); }

  // An executable in the stand-in PATH.
  void Tool(const std::string& name, const std::string& body) { stub_.Tool(name, body); }
  // The container CLI: prints `listing` for `ps`, exits `rc`; records its
  // arguments.
  void Cli(const std::string& listing, int rc = 0) {
    Tool("docker", "echo \"$*\" >> " + ShellQuote(dir_ + "/cli.args") + "\nprintf '%s' " +
                       ShellQuote(listing) + "\nexit " + std::to_string(rc) + "\n");
  }
  // Runs `script` with only the stand-ins (and the base system) on PATH.
  // No engine socket: the stand-in CLI answers (engine_listing_test.cc has
  // the API's path).
  std::string Run(const std::string& script) {
    return stub_.Run(script, "DOCKER_HOST=unix:///nonexistent").out;
  }
  // The listing and the decision scripts, then what it chose for fleet-probe.
  std::string Decide(const std::string& cli, GpuContextMode mode) {
    return Run(ServeListingScript(cli) + GpuContextScript(mode) + "printf 'fpa=%s\\n' \"$fpa\"\n");
  }
  std::string Read(const std::string& name) { return stub_.Read(name); }

  const testing_support::StubCli stub_{"gpu_context_test"};
  const std::string dir_ = stub_.dir();
};

TEST_F(GpuContextTest, ServeRunningMeansNoContext) {
  Cli("serving=fleet-qwen\nserving=fleet-mimo\n");
  EXPECT_EQ(Decide("docker", GpuContextMode::kAuto),
            "fleet_serves=listed:fleet-qwen fleet-mimo \n"
            "gpu_context=serving:fleet-qwen fleet-mimo \nfpa=--no-context\n");
  EXPECT_EQ(Read("cli.args"), "ps --filter label=fleet.deployment --format serving={{.Names}}\n");
}

TEST_F(GpuContextTest, NoServeMeansContext) {
  Cli("");
  EXPECT_EQ(Decide("docker", GpuContextMode::kAuto),
            "fleet_serves=listed:\ngpu_context=idle\nfpa=\n");
}

TEST_F(GpuContextTest, NoContainerCliMeansContext) {
  EXPECT_EQ(Decide("fleet-no-such-cli", GpuContextMode::kAuto),
            "fleet_serves=no-engine:\ngpu_context=no-engine\nfpa=\n");
}

TEST_F(GpuContextTest, CliThatCannotListMeansNoContext) {
  Cli("Cannot connect to the Docker daemon\n", 1);
  EXPECT_EQ(Decide("docker", GpuContextMode::kAuto),
            "fleet_serves=engine-error:Cannot connect to the Docker daemon\n"
            "gpu_context=engine-error:Cannot connect to the Docker daemon\nfpa=--no-context\n");
}

// The serves are still listed (a node fact of their own), but the decision
// does not depend on them.
TEST_F(GpuContextTest, AskedMeansContextEvenWhileAServeRuns) {
  Cli("serving=fleet-qwen\n");
  EXPECT_EQ(Decide("docker", GpuContextMode::kAlways),
            "fleet_serves=listed:fleet-qwen \ngpu_context=asked\nfpa=\n");
}

TEST(ParseServeListing, NamesOrWhyNot) {
  ServeListing l = ParseServeListing("listed:fleet-qwen fleet-mimo ");
  EXPECT_TRUE(l.listed);
  EXPECT_EQ(l.names, (std::vector<std::string>{"fleet-qwen", "fleet-mimo"}));
  l = ParseServeListing("listed:");
  EXPECT_TRUE(l.listed);
  EXPECT_TRUE(l.names.empty());
  l = ParseServeListing("no-engine:");
  EXPECT_TRUE(l.listed);  // no CLI: nothing runs
  EXPECT_TRUE(l.names.empty());
  l = ParseServeListing("engine-error:permission denied: a:b");
  EXPECT_FALSE(l.listed);
  EXPECT_TRUE(l.names.empty());
  EXPECT_EQ(l.error, "the container CLI cannot list containers (permission denied: a:b)");
  l = ParseServeListing("");
  EXPECT_FALSE(l.listed);
  EXPECT_FALSE(l.error.empty());
}

TEST(ParseGpuContext, Reasons) {
  EXPECT_TRUE(ParseGpuContext("idle").create);
  EXPECT_TRUE(ParseGpuContext("asked").create);
  EXPECT_TRUE(ParseGpuContext("no-engine").create);
  EXPECT_TRUE(ParseGpuContext("").create);  // an older script always made one
  const GpuContextDecision serving = ParseGpuContext("serving:fleet-qwen fleet-mimo ");
  EXPECT_FALSE(serving.create);
  EXPECT_EQ(serving.why,
            "no CUDA context: fleet serve fleet-qwen fleet-mimo runs on the node (fleet probe "
            "NODE --gpu creates one anyway)");
  EXPECT_FALSE(ParseGpuContext("engine-error").create);
  EXPECT_EQ(ParseGpuContext("engine-error:permission denied").why,
            "no CUDA context: the container CLI cannot list containers (permission denied), so "
            "a serve may run (fleet probe NODE --gpu creates one anyway)");
  EXPECT_FALSE(ParseGpuContext("something-new").create);
}

// The whole node script: fleet-probe gets --no-context while a serve runs,
// and the facts say why and how long it took.
TEST_F(GpuContextTest, NodeFactsCarryTheDecision) {
  Tool("fleet-probe",
       "echo \"$*\" >> " + ShellQuote(dir_ + "/probe.args") +
           "\nctx=true; [ \"$1\" = --no-context ] && ctx=false\n"
           "printf '{\"probe_version\":1,\"cuda_context\":%s,\"elapsed_ns\":1500000,"
           "\"gpus\":[{\"index\":0,"
           "\"memory_free_bytes\":5,\"memory_free_source\":\"host MemAvailable\"}]}\\n' $ctx\n");
  Cli("serving=fleet-qwen\n");
  NodeFacts f = ParseNodeFacts(Run(NodeFactsScript("/nonexistent", "docker")));
  GpuFacts gpu;
  ASSERT_TRUE(GpuFactsFromJson(f.gpu, &gpu)) << f.gpu.dump();
  EXPECT_FALSE(gpu.cuda_context);
  EXPECT_EQ(gpu.context_decision.rfind("no CUDA context: fleet serve fleet-qwen runs", 0), 0u)
      << gpu.context_decision;
  ASSERT_EQ(gpu.gpus.size(), 1u);
  EXPECT_EQ(gpu.gpus[0].memory_free_source, "host MemAvailable");
  EXPECT_DOUBLE_EQ(f.gpu_probe_s, 0.0015);  // the probe's own elapsed_ns
  EXPECT_TRUE(f.fleet_serves_listed);
  EXPECT_EQ(f.fleet_serves, std::vector<std::string>{"fleet-qwen"});

  Cli("");
  f = ParseNodeFacts(Run(NodeFactsScript("/nonexistent", "docker")));
  ASSERT_TRUE(GpuFactsFromJson(f.gpu, &gpu));
  EXPECT_TRUE(gpu.cuda_context);
  EXPECT_EQ(gpu.context_decision, "a CUDA context: no fleet serve runs on the node");
  EXPECT_TRUE(f.fleet_serves_listed);
  EXPECT_TRUE(f.fleet_serves.empty());

  Cli("serving=fleet-qwen\n");
  f = ParseNodeFacts(Run(NodeFactsScript("/nonexistent", "docker", GpuContextMode::kAlways)));
  ASSERT_TRUE(GpuFactsFromJson(f.gpu, &gpu));
  EXPECT_TRUE(gpu.cuda_context);
  EXPECT_EQ(Read("probe.args"), "--no-context\n\n\n");
}

// A driver hung in cuInit must not hang a plan: the installed probe built
// from this fleet's source ends itself after 20 s (fleet_probe.cc), any
// other fleet-probe runs under `timeout 20`.
TEST_F(GpuContextTest, OnlyTheProbeOfThisSourceRunsWithoutTimeout) {
  Tool("timeout",
       "echo \"$*\" >> " + ShellQuote(dir_ + "/timeout.args") + "\nshift\nexec \"$@\"\n");
  Cli("");
  ASSERT_EQ(mkdir((dir_ + "/.fleet").c_str(), 0755), 0);
  ASSERT_EQ(mkdir((dir_ + "/" + kProbeInstallDir).c_str(), 0755), 0);
  const std::string probe = dir_ + "/" + kProbeInstallPath;
  std::ofstream(probe) << "#!/bin/sh\necho \"$*\" >> " << ShellQuote(dir_ + "/probe.args")
                       << "\nprintf '{\"probe_version\":1,\"cuda_context\":true,\"gpus\":[]}\\n'\n";
  chmod(probe.c_str(), 0755);

  std::ofstream(dir_ + "/" + kProbeVersionFile) << std::string(64, '0') << "\n";
  NodeFacts f = ParseNodeFacts(Run(NodeFactsScript("/nonexistent", "docker")));
  EXPECT_TRUE(f.gpu.is_object()) << f.gpu.dump();
  EXPECT_EQ(Read("timeout.args"), "20 " + probe + "\n");

  std::ofstream(dir_ + "/" + kProbeVersionFile) << kFleetProbeSourceSha256 << "\n";
  f = ParseNodeFacts(Run(NodeFactsScript("/nonexistent", "docker")));
  EXPECT_TRUE(f.gpu.is_object()) << f.gpu.dump();
  EXPECT_EQ(Read("timeout.args"), "20 " + probe + "\n");  // not run again
  EXPECT_EQ(Read("probe.args"), "\n\n");                  // the probe was, twice
}

// Without fleet-probe on the node the serves are listed all the same.
TEST_F(GpuContextTest, NodeFactsListServesWithoutFleetProbe) {
  Cli("serving=fleet-qwen\nserving=fleet-old\n");
  NodeFacts f = ParseNodeFacts(Run(NodeFactsScript("/nonexistent", "docker")));
  EXPECT_TRUE(f.fleet_serves_listed);
  EXPECT_EQ(f.fleet_serves, (std::vector<std::string>{"fleet-qwen", "fleet-old"}));
  Cli("Cannot connect to the Docker daemon\n", 1);
  f = ParseNodeFacts(Run(NodeFactsScript("/nonexistent", "docker")));
  EXPECT_FALSE(f.fleet_serves_listed);
}

// The plan's fragment asks the node's own container CLI, and no other
// (the script's text may name docker: its socket's branch, unused here).
TEST_F(GpuContextTest, ThePlansProbeAsksTheNodesContainerCli) {
  stub_.RecordingTool("podman", "case \"$1 $2\" in 'ps '*) echo serving=fleet-qwen ;; esac\n");
  stub_.RecordingTool("docker", "exit 0\n");
  NodeSpec spec;
  spec.container_cli = "podman";
  spec.sysfs = "/nonexistent";
  const NodeFacts f = ParseNodeFacts(Run(NodeProvider().ProbeScript(DesiredResource{}, spec)));
  EXPECT_EQ(f.fleet_serves, std::vector<std::string>{"fleet-qwen"});
  EXPECT_NE(stub_.Calls("podman").find("ps --filter label=fleet.deployment"), std::string::npos)
      << stub_.Calls("podman");
  EXPECT_EQ(stub_.Calls("docker"), "");
}

// The plan's node probe lists the node's images once (image_listing.h) for
// every image resource on it: its facts carry the listing, or why not.
TEST_F(GpuContextTest, ThePlansNodeProbeListsImagesOnce) {
  NodeSpec spec;
  spec.container_cli = "docker";
  spec.sysfs = "/nonexistent";
  const std::string script = NodeProvider().ProbeScript(DesiredResource{}, spec);
  // The listing (image_listing.sh) holds both CLIs' `image ls`: its one
  // "images=" report line counts it.
  const size_t ls = script.find("echo images=cli-missing");
  ASSERT_NE(ls, std::string::npos);
  EXPECT_EQ(script.find("echo images=cli-missing", ls + 1), std::string::npos);
  Cli(std::string(64, 'c') + "\n");  // `image ls -q` prints the ID; so does inspect
  NodeFacts f = ParseNodeFacts(Run(script));
  EXPECT_EQ(f.images.value("listed", false), true) << f.images.dump();
  EXPECT_EQ(f.images.value("error", "?"), "") << f.images.dump();
  EXPECT_NE(Read("cli.args").find("image inspect --format"), std::string::npos);
  Cli("Cannot connect to the Docker daemon\n", 1);
  f = ParseNodeFacts(Run(script));
  EXPECT_NE(f.images.value("error", "").find("`image ls` exited 1: Cannot connect"),
            std::string::npos)
      << f.images.dump();
  // fleet probe and apply's re-reads do not list.
  EXPECT_TRUE(ParseNodeFacts(Run(NodeFactsScript("/nonexistent", "docker"))).images.is_null());
}

}  // namespace
}  // namespace fleet
