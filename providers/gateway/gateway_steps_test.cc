// The gateway's node-side scripts on their own, with stand-in CLIs: the
// probe (gateway_probe.sh), the wait for a reload (gateway_wait_loaded.sh)
// and the wait for the old worker (gateway_wait_drained.sh).
#include "providers/gateway/gateway_steps.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "src/shell_quote.h"
#include "tests/support/stub_cli.h"

namespace fleet {
namespace {

using testing_support::ShellRun;
using testing_support::StubCli;

GatewayWant Want() {
  GatewayWant w;
  w.gateway = "edge";
  w.container = "fleet-gw-edge";
  w.cli = "docker";
  w.port = 8443;
  w.config = "cfg-new";
  return w;
}

// A curl whose /health answer carries the config header `config` (its
// headers on stdout, as `-D -` prints them, with HTTP's \r\n).
std::string CurlAnswering(const std::string& config) {
  return "printf 'HTTP/1.1 200 OK\\r\\nContent-Length: 0\\r\\nX-Fleet-Config: %s\\r\\n\\r\\n' " +
         ShellQuote(config) + "\n";
}

TEST(GatewaySteps, ProbeReadsContainerConfigAndLoaded) {
  const StubCli stub("gateway_probe_test");
  const GatewayWant w = Want();
  stub.RecordingTool("docker", "echo 'running spec123'\n");
  stub.RecordingTool("curl", CurlAnswering("cfg-old"));
  stub.Write(".fleet/gateways/edge/haproxy.cfg",
             "# fleet-config cfg-old\n"
             "# fleet-route qwen serve-a dgx1 10.0.0.1:8000 /health\n"
             "global\n");
  ShellRun run = stub.Run(GatewayProbeScript(w));
  EXPECT_EQ(run.exit_code, 0);
  GatewayProbe p = ParseGatewayProbe(run.out);
  EXPECT_TRUE(p.cli_found);
  EXPECT_TRUE(p.exists) << run.out;
  EXPECT_EQ(p.state, "running");
  EXPECT_EQ(p.spec, "spec123");
  EXPECT_EQ(p.written, "cfg-old");
  ASSERT_EQ(p.written_routes.size(), 1u) << run.out;
  EXPECT_EQ(p.written_routes[0].deployment, "serve-a");
  EXPECT_EQ(p.loaded, "cfg-old");
  EXPECT_EQ(stub.Calls("docker"),
            "container inspect --format {{.State.Status}} {{index .Config.Labels \"fleet.spec\"}} "
            "fleet-gw-edge\n");
  EXPECT_NE(stub.Calls("curl").find("http://127.0.0.1:8443/health"), std::string::npos);

  // No container, no config written, nothing answering: none of them read.
  stub.Tool("docker", "echo 'Error: No such object: fleet-gw-edge' >&2; exit 1\n");
  stub.Tool("curl", "exit 7\n");
  stub.Write(".fleet/gateways/edge/haproxy.cfg", "");
  run = stub.Run(GatewayProbeScript(w));
  EXPECT_EQ(run.out, "loaded=\n");
  p = ParseGatewayProbe(run.out);
  EXPECT_TRUE(p.cli_found);
  EXPECT_FALSE(p.exists);
  EXPECT_EQ(p.loaded, "");

  GatewayWant missing = w;
  missing.cli = "fleet-no-such-cli";
  run = stub.Run(GatewayProbeScript(missing));
  EXPECT_FALSE(ParseGatewayProbe(run.out).cli_found) << run.out;
}

TEST(GatewaySteps, WaitLoadedEndsOnTheNewConfigOrAStoppedContainer) {
  const StubCli stub("gateway_wait_test");
  const GatewayWant w = Want();
  stub.RecordingTool("docker", "echo running\n");
  // The old config twice, then the new one.
  stub.Tool("curl",
            "n=$(cat curl.n 2>/dev/null || echo 0); echo $((n + 1)) > curl.n\n"
            "if [ \"$n\" -lt 2 ]; then c=cfg-old; else c=cfg-new; fi\n"
            "printf 'HTTP/1.1 200 OK\\r\\nX-Fleet-Config: %s\\r\\n\\r\\n' \"$c\"\n");
  ShellRun run = stub.Run(GatewayWaitLoadedScript(w));
  EXPECT_EQ(run.exit_code, 0) << run.out;
  EXPECT_EQ(stub.Read("curl.n"), "3\n");
  EXPECT_EQ(stub.Calls("docker"),
            "container inspect --format {{.State.Status}} fleet-gw-edge\n"
            "container inspect --format {{.State.Status}} fleet-gw-edge\n");

  stub.Tool("curl", CurlAnswering("cfg-old"));
  stub.Tool("docker", "echo exited\n");
  run = stub.Run(GatewayWaitLoadedScript(w));
  EXPECT_EQ(run.exit_code, 3);
  EXPECT_EQ(run.out, "the container is exited\n");
}

TEST(GatewaySteps, WaitDrainedCountsTheMastersWorkers) {
  const StubCli stub("gateway_drain_test");
  GatewayWant w = Want();
  w.drain_s = -4;                    // 4 looks, 1 s
  stub.Tool("docker", "echo ''\n");  // no running process
  ShellRun run = stub.Run(GatewayWaitDrainedScript(w));
  EXPECT_EQ(run.exit_code, 0);

  // A "master" with two children (the current worker and the old one):
  // still draining after its tries.
  ASSERT_EQ(std::system(("cd " + ShellQuote(stub.dir()) +
                         " && sh -c 'sleep 30 & echo $! > old.pid; sleep 30 & echo $! > cur.pid; "
                         "echo $$ > master.pid; wait' >/dev/null 2>&1 &")
                            .c_str()),
            0);
  std::string pid;
  for (int i = 0; i < 250 && (pid.empty() || pid.back() != '\n'); ++i) {
    usleep(20000);
    pid = stub.Read("master.pid");
  }
  ASSERT_FALSE(pid.empty());
  const int old_worker = std::stoi(stub.Read("old.pid"));
  const int current_worker = std::stoi(stub.Read("cur.pid"));
  stub.Tool("docker", "echo " + pid);
  run = stub.Run(GatewayWaitDrainedScript(w));
  EXPECT_EQ(run.exit_code, 3);
  EXPECT_EQ(run.out, "2\n");

  // The old worker gone (and reaped by the master): drained.
  kill(old_worker, SIGTERM);
  for (int i = 0; i < 250 && kill(old_worker, 0) == 0; ++i) usleep(20000);
  run = stub.Run(GatewayWaitDrainedScript(w));
  EXPECT_EQ(run.exit_code, 0) << run.out;
  kill(current_worker, SIGTERM);
}

// gateway_config_write.sh: the rendered config, whole, and no temporary
// file left; nothing when its folder cannot be made.
TEST(GatewaySteps, ConfigWriteRenamesTheWholeConfigIntoPlace) {
  const StubCli stub("gateway_config_write_test");
  const GatewayWant w = Want();
  ShellRun run = stub.Run(GatewayConfigWriteScript(w));
  EXPECT_EQ(run.exit_code, 0);
  EXPECT_EQ(stub.Read(".fleet/gateways/edge/haproxy.cfg"), RenderHaproxyConfig(w));
  EXPECT_FALSE(RenderHaproxyConfig(w).empty());
  EXPECT_EQ(stub.Read(".fleet/gateways/edge/.haproxy.cfg.new"), "");

  const StubCli blocked("gateway_config_write_test");
  blocked.Write(".fleet/gateways", "a file where the folder goes");
  run = blocked.Run(GatewayConfigWriteScript(w));
  EXPECT_NE(run.exit_code, 0);
}

}  // namespace
}  // namespace fleet
