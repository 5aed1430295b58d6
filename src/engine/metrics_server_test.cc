#include "src/engine/metrics_server.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/loopback_port.h"

namespace fleet {
namespace {

using SteadyClock = std::chrono::steady_clock;

int FreePort() { return testing_support::UnusedLoopbackPort(); }

int Connect(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// One scrape with its own connection; the whole response, "" on a timeout.
std::string Scrape(int port, int timeout_s) {
  const int fd = Connect(port);
  if (fd < 0) return "";
  timeval tv{timeout_s, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  const std::string req = "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
  (void)!write(fd, req.data(), req.size());
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = read(fd, buf, sizeof buf)) > 0;) out.append(buf, static_cast<size_t>(n));
  close(fd);
  return out;
}

int OpenDescriptors() {
  int n = 0;
  DIR* d = opendir("/proc/self/fd");
  while (readdir(d) != nullptr) ++n;
  closedir(d);
  return n - 3;  // ., .. and the directory's own
}

TEST(ParseMetricsListen, NoAddressIsLoopback) {
  std::string host;
  int port = 0;
  ASSERT_TRUE(ParseMetricsListen(":9464", &host, &port));
  EXPECT_EQ(host, "127.0.0.1");
  EXPECT_EQ(port, 9464);
  ASSERT_TRUE(ParseMetricsListen("9464", &host, &port));
  EXPECT_EQ(host, "127.0.0.1");
  ASSERT_TRUE(ParseMetricsListen("0.0.0.0:9464", &host, &port));
  EXPECT_EQ(host, "0.0.0.0");  // every address, when asked for by name
  ASSERT_TRUE(ParseMetricsListen("[::1]:80", &host, &port));
  EXPECT_EQ(host, "::1");
  EXPECT_FALSE(ParseMetricsListen("nowhere", &host, &port));
  EXPECT_FALSE(ParseMetricsListen("127.0.0.1:0", &host, &port));
  EXPECT_FALSE(ParseMetricsListen("127.0.0.1:", &host, &port));
}

TEST(MetricsServer, SlowClientsDoNotStarveAScrape) {
  const int port = FreePort();
  MetricsServer server;
  ASSERT_TRUE(server.Start("127.0.0.1:" + std::to_string(port)).ok());
  server.Publish("fleet_watch_rounds_total 3\n");
  // 16 clients that trickle a request line a byte at a time (httplib 0.11's
  // 8 workers once all waited on such clients).
  std::vector<int> slow;
  for (int i = 0; i < 16; ++i) {
    const int fd = Connect(port);
    ASSERT_GE(fd, 0);
    slow.push_back(fd);
  }
  std::atomic<bool> stop{false};
  std::thread trickle([&] {
    const std::string req = "GET /metrics HTTP/1.1\r\nHost: slow\r\n";
    for (size_t i = 0; !stop && i < req.size(); ++i) {
      for (int fd : slow) (void)!write(fd, &req[i], 1);
      for (int k = 0; k < 10 && !stop; ++k)
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  for (int i = 0; i < 5; ++i) {
    const auto start = SteadyClock::now();
    const std::string got = Scrape(port, 3);
    const double took = std::chrono::duration<double>(SteadyClock::now() - start).count();
    EXPECT_NE(got.find("fleet_watch_rounds_total 3"), std::string::npos) << got;
    EXPECT_LT(took, 1.0);
  }
  stop = true;
  trickle.join();
  for (int fd : slow) close(fd);
}

TEST(MetricsServer, AFloodHoldsABoundedNumberOfDescriptorsAndPassesOver) {
  const int port = FreePort();
  MetricsServer server;
  ASSERT_TRUE(server.Start(":" + std::to_string(port)).ok());
  server.Publish("up 1\n");
  const int before = OpenDescriptors();
  std::vector<int> flood;
  // Non-blocking: a connect beyond the listener's queue waits in the kernel.
  for (int i = 0; i < 300; ++i) {
    const int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    (void)connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
    flood.push_back(fd);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  // Ours: the flood's client ends; the rest is what the server accepted.
  const int accepted = OpenDescriptors() - before - static_cast<int>(flood.size());
  EXPECT_LE(accepted, MetricsServer::kMaxConnections + 2) << accepted;
  for (int fd : flood) close(fd);
  // Closed clients pass through quickly; scrapes answer again.
  std::string got;
  const auto deadline = SteadyClock::now() + std::chrono::seconds(10);
  while (got.empty() && SteadyClock::now() < deadline) got = Scrape(port, 2);
  EXPECT_NE(got.find("up 1"), std::string::npos);
}

}  // namespace
}  // namespace fleet
