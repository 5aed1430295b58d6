// The HTTP side of `fleet watch --metrics-listen` (cpp-httplib): GET
// /metrics answers the text last published; nothing else is served. The
// server runs on its own threads, so a scrape never waits for a round.
//
// It is built to be flooded without hurting the watch (issue 44: ~1,000
// held connections took every file descriptor, and the rounds blamed the
// serves): at most kMaxConnections connections are held at once (the rest
// wait in the kernel's accept queue, costing the watch no descriptor), each
// has its own worker (so 16 slow clients leave workers for a scrape), a
// client that sends nothing for kClientTimeoutS is dropped, and a kept-alive
// connection serves a few requests at most. Without an address it listens
// on loopback only.
#ifndef FLEET_SRC_ENGINE_METRICS_SERVER_H_
#define FLEET_SRC_ENGINE_METRICS_SERVER_H_

#include <memory>
#include <string>

#include "src/clock.h"
#include "src/status.h"

namespace fleet {

class MetricsServer {
 public:
  // Connections held at once, each with a worker; far below any file limit.
  static constexpr int kMaxConnections = 48;
  static constexpr int kClientTimeoutS = 2;  // read and write, per operation
  static constexpr int kKeepAliveRequests = 8;

  // `clock` times the wait for the server's thread when it stops.
  explicit MetricsServer(Clock* clock = RealClock());
  ~MetricsServer();  // stops the server and joins its threads

  // Binds `listen` ("ADDR:PORT", "[::1]:PORT", "0.0.0.0:PORT" for every
  // address; ":PORT" or "PORT": loopback) and starts serving. An error names
  // the address and why. REQUIRES: called once.
  Status Start(const std::string& listen);

  // What the next scrapes get (Prometheus text, version 0.0.4).
  void Publish(std::string text);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// "ADDR:PORT" -> host and port; "[v6]:PORT"; ":PORT" and "PORT" are
// 127.0.0.1. False when it is none of these.
bool ParseMetricsListen(const std::string& listen, std::string* host, int* port);

}  // namespace fleet

#endif  // FLEET_SRC_ENGINE_METRICS_SERVER_H_
