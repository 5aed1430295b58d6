// The HTTP side of `fleet watch --metrics-listen` (cpp-httplib): GET
// /metrics answers the text last published; nothing else is served. The
// server runs on its own thread, so a scrape never waits for a round.
#ifndef FLEET_SRC_ENGINE_METRICS_SERVER_H_
#define FLEET_SRC_ENGINE_METRICS_SERVER_H_

#include <memory>
#include <string>

#include "src/status.h"

namespace fleet {

class MetricsServer {
 public:
  MetricsServer();
  ~MetricsServer();  // stops the server and joins its thread

  // Binds `listen` ("ADDR:PORT", "[::1]:PORT" or ":PORT" for every
  // address) and starts serving. An error names the address and why.
  // REQUIRES: called once.
  Status Start(const std::string& listen);

  // What the next scrapes get (Prometheus text, version 0.0.4).
  void Publish(std::string text);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace fleet

#endif  // FLEET_SRC_ENGINE_METRICS_SERVER_H_
