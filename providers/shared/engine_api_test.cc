// engine_socket.sh and engine_api_get.sh on their own under /bin/sh: which
// socket a node's container CLI would use, and one GET of the engine's API
// by the installed fleet-probe (this build's, against a stand-in engine;
// or a stand-in probe where the probe itself is what is tested).
#include "providers/shared/engine_api.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <string>

#include "providers/shared/engine_api_test_util.h"
#include "src/probe/probe_install.h"
#include "src/shell_quote.h"
#include "tests/support/stub_cli.h"

namespace fleet {
namespace {

class EngineApiTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_NE(dir_, ""); }
  void TearDown() override {
    if (sock_ >= 0) close(sock_);
  }

  // A listening socket at `relative` below the scratch folder (the
  // engine's, as far as `[ -S ]` can tell); its full path.
  std::string Socket(const std::string& relative) {
    const std::string path = dir_ + "/" + relative;
    stub_.Write(relative, "");
    unlink(path.c_str());
    sock_ = socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path.c_str(), sizeof addr.sun_path - 1);
    EXPECT_EQ(bind(sock_, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0) << path;
    EXPECT_EQ(listen(sock_, 1), 0);
    return path;
  }
  // The socket engine_socket.sh chose for `cli` under `env`.
  std::string SocketOf(const std::string& cli, const std::string& env) {
    return stub_.Run(EngineSocketScript(cli) + "printf 'els=%s\\n' \"$els\"\n", env).out;
  }
  // A stand-in installed fleet-probe running `body`.
  void StandInProbe(const std::string& body) {
    stub_.Write(kProbeInstallPath, "#!/bin/sh\n" + body);
    chmod((dir_ + "/" + kProbeInstallPath).c_str(), 0755);
  }
  // engine_api_get.sh's GET of `path` as docker's socket `socket` answers,
  // and what the caller's names hold after it.
  std::string Get(const std::string& path, std::initializer_list<const char*> codes,
                  const std::string& socket) {
    return stub_
        .Run(EngineSocketScript("docker") + ProbeApiGetScript("g_out", "g_ok", path, codes) +
                 "printf 'ok=%s rc=%s\\n%s\\n' \"$g_ok\" \"$g_out_rc\" \"$g_out\"\n",
             "DOCKER_HOST=" + ShellQuote("unix://" + socket))
        .out;
  }

  const testing_support::StubCli stub_{"engine_api_test"};
  const std::string dir_ = stub_.dir();
  int sock_ = -1;
};

TEST_F(EngineApiTest, DockersSocketIsDockerHosts) {
  const std::string sock = Socket("d.sock");
  EXPECT_EQ(SocketOf("docker", "DOCKER_HOST=" + ShellQuote("unix://" + sock)),
            "els=" + sock + "\n");
  // A DOCKER_HOST that is no socket, a remote one, a context: the CLI's
  // engine is not this socket.
  EXPECT_EQ(SocketOf("docker", "DOCKER_HOST=" + ShellQuote("unix://" + dir_ + "/none.sock")),
            "els=\n");
  EXPECT_EQ(SocketOf("docker", "DOCKER_HOST=tcp://10.0.0.1:2375"), "els=\n");
  EXPECT_EQ(SocketOf("docker", "DOCKER_CONTEXT=lab DOCKER_HOST=" + ShellQuote("unix://" + sock)),
            "els=\n");
  stub_.Write(".docker/config.json", "{\"currentContext\": \"lab\"}\n");
  EXPECT_EQ(SocketOf("docker", "DOCKER_HOST=" + ShellQuote("unix://" + sock)), "els=\n");
}

TEST_F(EngineApiTest, PodmansSocketOnlyWhileItsServiceRuns) {
  const std::string sock = Socket("xdg/podman/podman.sock");
  const std::string xdg = "XDG_RUNTIME_DIR=" + ShellQuote(dir_ + "/xdg");
  // No systemd: a socket there is a running service's.
  EXPECT_EQ(SocketOf("podman", xdg), "els=" + sock + "\n");
  EXPECT_EQ(SocketOf("podman", xdg + " CONTAINER_HOST=ssh://lab/run/podman.sock"), "els=\n");
  // Under systemd, only while podman.service is active: a socket-activated
  // one would start on the first call.
  stub_.Write("xdg/systemd/.keep", "");
  stub_.RecordingTool("systemctl", "exit 3\n");
  EXPECT_EQ(SocketOf("podman", xdg), "els=\n");
  EXPECT_EQ(stub_.Calls("systemctl"), "--user is-active --quiet podman.service\n");
  stub_.Tool("systemctl", "exit 0\n");
  EXPECT_EQ(SocketOf("podman", xdg), "els=" + sock + "\n");
  // No other CLI has a socket fleet reads; docker's variables are not podman's.
  EXPECT_EQ(SocketOf("nerdctl", xdg), "els=\n");
  EXPECT_EQ(SocketOf("podman", "DOCKER_HOST=" + ShellQuote("unix://" + sock)), "els=\n");
}

TEST_F(EngineApiTest, TheInstalledProbeGetsTheApisAnswer) {
  ASSERT_TRUE(testing_engine::InstallBuiltProbe(dir_));
  const std::string sock = dir_ + "/api.sock";
  testing_engine::FakeEngineApi api(sock, {{"/images/abc/json", {"200 OK", "{\"Id\":\"abc\"}"}}});
  ASSERT_TRUE(api.ok());
  EXPECT_EQ(Get("/images/abc/json", {"200", "404"}, sock),
            "ok=1 rc=0\n{\"Id\":\"abc\"}\n@api=200\n");
  // A 404 answers only where the caller counts it.
  EXPECT_EQ(Get("/images/xyz/json", {"200", "404"}, sock).substr(0, 11), "ok=1 rc=0\n{");
  EXPECT_EQ(Get("/images/xyz/json", {"200"}, sock).substr(0, 10), "ok= rc=0\n{");
  EXPECT_EQ(api.requests(), 3);
}

TEST_F(EngineApiTest, NoAnswerWithoutProbeSocketOrAWholeRead) {
  const std::string sock = Socket("d.sock");
  EXPECT_EQ(Get("/images/abc/json", {"200"}, sock), "ok= rc=127\n\n");  // no probe installed
  EXPECT_EQ(Get("/images/abc/json", {"200"}, dir_ + "/none.sock"), "ok= rc=\n\n");  // no socket
  // A probe that printed an answer but failed (its deadline, a short read).
  StandInProbe("printf '{}\\n@api=200\\n'\nexit 1\n");
  EXPECT_EQ(Get("/images/abc/json", {"200"}, sock), "ok= rc=1\n{}\n@api=200\n");
  // "@api=200" is the last line's, not a body's.
  StandInProbe("printf '\"\\n@api=200\"\\n@api=500\\n'\n");
  EXPECT_EQ(Get("/images/abc/json", {"200"}, sock).substr(0, 9), "ok= rc=0\n");
}

}  // namespace
}  // namespace fleet
