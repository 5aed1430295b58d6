// A busy engine is not a dead one (issue 42): the gateway's check of a
// serve waits its deployment's health.request_timeout, so a serve whose
// health answers late (an engine tokenizing a long prompt) keeps its
// traffic, while one with the default 5 s is dropped. Runs the config
// fleet writes in Debian's HAProxy, with the serves as frontends of the
// same HAProxy that answer every request 10 s late (a Lua action that
// sleeps: Debian's HAProxy 2.6 is built with Lua).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include "providers/gateway/gateway_config.h"
#include "tests/support/loopback_port.h"
#include "tests/support/temp_dir.h"

namespace fleet {
namespace {

namespace fs = std::filesystem;

int FreePort() { return testing_support::UnusedLoopbackPort(); }

// One HTTP/1.0 GET of 127.0.0.1:port; the whole answer, or "".
std::string Get(int port, const std::string& path) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  timeval tv{5, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  std::string answer;
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) {
    const std::string request = "GET " + path + " HTTP/1.0\r\n\r\n";
    if (write(fd, request.data(), request.size()) == static_cast<ssize_t>(request.size())) {
      char buf[4096];
      for (ssize_t n; (n = read(fd, buf, sizeof buf)) > 0;) answer.append(buf, n);
    }
  }
  close(fd);
  return answer;
}

// "UP", "DOWN" or "" for `backend`'s one server, from HAProxy's metrics.
std::string ServerState(const std::string& metrics, const std::string& backend) {
  for (const char* state : {"UP", "DOWN"}) {
    const std::string line = "haproxy_server_status{proxy=\"" + backend + "\",server=\"" +
                             backend.substr(6) + "_n1\",state=\"" + state + "\"} 1";
    if (metrics.find(line) != std::string::npos) return state;
  }
  return "";
}

TEST(GatewayBusyCheck, ASlowHealthKeepsTrafficWithinTheRequestTimeout) {
  if (std::system("command -v haproxy >/dev/null 2>&1") != 0) GTEST_SKIP() << "no haproxy";
  GatewayWant w;
  w.gateway = "lab";
  w.port = FreePort();
  // busy: request_timeout 2m, grace 2; plain: the defaults (5 s, 2).
  w.routes = {{"busy", "busy", "n1", "127.0.0.1", FreePort(), "/health"},
              {"plain", "plain", "n1", "127.0.0.1", FreePort(), "/health"}};
  w.routes[0].check_timeout_s = 120;
  SealGatewayWant(&w);
  const testing_support::TempDir tmp("fleet-gw-busy");
  const fs::path dir = tmp.path();
  const fs::path lua = dir / "busy.lua";
  std::ofstream(lua) << "core.register_action('busy', {'http-req'}, function(txn) "
                        "core.sleep(10) end)\n";
  std::string config = RenderHaproxyConfig(w);
  config.replace(config.find("global\n"), 7, "global\n  lua-load " + lua.string() + "\n");
  for (const GatewayRoute& r : w.routes)
    config += "frontend serve_" + r.deployment + "\n  bind 127.0.0.1:" + std::to_string(r.port) +
              "\n  http-request lua.busy\n"
              "  http-request return status 200 content-type text/plain string ok\n\n";
  const fs::path path = dir / "busy.cfg";
  std::ofstream(path) << config;
  const pid_t pid = fork();
  if (pid == 0) {
    freopen("/dev/null", "w", stderr);
    execlp("haproxy", "haproxy", "-db", "-q", "-f", path.c_str(), nullptr);
    _exit(127);
  }
  ASSERT_GT(pid, 0);
  // plain's checks time out at 5 s: down at its first failures. busy's
  // are answered at 10 s, within its 2 minutes: after 25 s (two of its
  // checks answered, four of plain's failed) it is still up. HAProxy
  // starts a server up, so only a state after its checks says anything.
  std::this_thread::sleep_for(std::chrono::seconds(25));
  const std::string metrics = Get(w.port, "/metrics");
  const std::string busy = ServerState(metrics, "model_busy");
  const std::string plain = ServerState(metrics, "model_plain");
  kill(pid, SIGTERM);
  int status = 0;
  waitpid(pid, &status, 0);
  EXPECT_EQ(busy, "UP") << config;
  EXPECT_EQ(plain, "DOWN") << config;
}

}  // namespace
}  // namespace fleet
