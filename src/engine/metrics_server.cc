#include "src/engine/metrics_server.h"

#include <httplib.h>

#include <mutex>
#include <thread>

namespace fleet {

struct MetricsServer::Impl {
  httplib::Server server;
  std::thread thread;
  std::mutex mu;
  std::string text;
};

namespace {

// "ADDR:PORT" -> host and port; "[v6]:PORT" and ":PORT" (every address) too.
bool SplitListen(const std::string& listen, std::string* host, int* port) {
  const size_t colon = listen.rfind(':');
  if (colon == std::string::npos) return false;
  *host = listen.substr(0, colon);
  if (host->size() >= 2 && host->front() == '[' && host->back() == ']')
    *host = host->substr(1, host->size() - 2);
  if (host->empty()) *host = "0.0.0.0";
  const std::string p = listen.substr(colon + 1);
  if (p.empty() || p.size() > 5 || p.find_first_not_of("0123456789") != std::string::npos)
    return false;
  *port = std::stoi(p);
  return *port > 0 && *port < 65536;
}

}  // namespace

MetricsServer::MetricsServer() : impl_(std::make_unique<Impl>()) {}

MetricsServer::~MetricsServer() {
  if (impl_->thread.joinable()) {
    impl_->server.stop();
    impl_->thread.join();
  }
}

Status MetricsServer::Start(const std::string& listen) {
  std::string host;
  int port = 0;
  if (!SplitListen(listen, &host, &port))
    return Status::Error("--metrics-listen " + listen +
                         ": expected ADDR:PORT (e.g. 127.0.0.1:9464)");
  Impl* impl = impl_.get();
  impl->server.Get("/metrics", [impl](const httplib::Request&, httplib::Response& res) {
    std::lock_guard<std::mutex> lock(impl->mu);
    res.set_content(impl->text, "text/plain; version=0.0.4; charset=utf-8");
  });
  if (!impl->server.bind_to_port(host, port))
    return Status::Error("--metrics-listen " + listen +
                         ": cannot listen there (in use, or not an address of this machine)");
  impl->thread = std::thread([impl] { impl->server.listen_after_bind(); });
  return Status::OK();
}

void MetricsServer::Publish(std::string text) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->text = std::move(text);
}

}  // namespace fleet
