#include "src/engine/metrics_server.h"

#include <httplib.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <future>
#include <mutex>
#include <thread>
#include <vector>

#include "src/clock_wait.h"

namespace fleet {
namespace {

// httplib's task queue, bounded: one worker per held connection, and an
// accept loop that waits (in enqueue) while kMaxConnections are held, so a
// flood queues in the kernel, not in the watch's descriptor table. httplib
// 0.11's own pool accepts without bound and has 8 workers: 8 slow clients
// starved every scrape.
class BoundedPool : public httplib::TaskQueue {
 public:
  // `on_shutdown` runs when the listen loop ends, before httplib deletes
  // the pool.
  BoundedPool(size_t workers, std::function<void()> on_shutdown)
      : max_held_(workers), on_shutdown_(std::move(on_shutdown)) {
    for (size_t i = 0; i < workers; ++i) threads_.emplace_back([this] { Work(); });
  }

  void enqueue(std::function<void()> fn) override {
    std::unique_lock<std::mutex> l(mu_);
    room_.wait(l, [this] { return held_ < max_held_ || stopping_; });
    ++held_;
    jobs_.push_back(std::move(fn));
    work_.notify_one();
  }

  void shutdown() override {
    on_shutdown_();
    {
      std::lock_guard<std::mutex> l(mu_);
      shutdown_ = true;
    }
    work_.notify_all();
    for (std::thread& t : threads_) t.join();
  }

  // The server stops: the accept loop must not wait for room any more.
  void Stopping() {
    std::lock_guard<std::mutex> l(mu_);
    stopping_ = true;
    room_.notify_all();
  }

 private:
  void Work() {
    for (;;) {
      std::function<void()> fn;
      {
        std::unique_lock<std::mutex> l(mu_);
        work_.wait(l, [this] { return shutdown_ || !jobs_.empty(); });
        if (jobs_.empty()) return;  // shut down, nothing left
        fn = std::move(jobs_.front());
        jobs_.pop_front();
      }
      fn();  // serves the connection and closes it
      std::lock_guard<std::mutex> l(mu_);
      --held_;
      room_.notify_one();
    }
  }

  const size_t max_held_;
  const std::function<void()> on_shutdown_;
  std::mutex mu_;
  std::condition_variable room_, work_;
  std::deque<std::function<void()>> jobs_;
  std::vector<std::thread> threads_;
  size_t held_ = 0;  // queued or being served
  bool stopping_ = false, shutdown_ = false;
};

}  // namespace

struct MetricsServer::Impl {
  Clock* clock = nullptr;
  httplib::Server server;
  std::thread thread;
  std::future<void> done;  // the server thread ended
  std::mutex mu;
  std::string text;
  BoundedPool* pool = nullptr;  // owned by the server's listen loop; null once it ends
};

bool ParseMetricsListen(const std::string& listen, std::string* host, int* port) {
  const size_t colon = listen.rfind(':');
  *host = colon == std::string::npos ? "" : listen.substr(0, colon);
  if (host->size() >= 2 && host->front() == '[' && host->back() == ']')
    *host = host->substr(1, host->size() - 2);
  // No address: loopback. Every address is asked for by name (0.0.0.0, ::).
  if (host->empty()) *host = "127.0.0.1";
  const std::string p = colon == std::string::npos ? listen : listen.substr(colon + 1);
  if (p.empty() || p.size() > 5 || p.find_first_not_of("0123456789") != std::string::npos)
    return false;
  *port = std::stoi(p);
  return *port > 0 && *port < 65536;
}

MetricsServer::MetricsServer(Clock* clock) : impl_(std::make_unique<Impl>()) {
  impl_->clock = clock;
}

MetricsServer::~MetricsServer() {
  if (!impl_->thread.joinable()) return;
  {
    std::lock_guard<std::mutex> l(impl_->mu);
    if (impl_->pool != nullptr) impl_->pool->Stopping();
  }
  impl_->server.stop();
  // A client trickling a header a byte at a time holds its worker until its
  // header is whole; the watch is exiting and does not wait for it.
  const auto deadline = impl_->clock->SteadyNow() + std::chrono::seconds(kClientTimeoutS + 1);
  if (WaitOnClock(impl_->clock, deadline, [this] {
        return impl_->done.wait_for(std::chrono::seconds::zero()) == std::future_status::ready;
      })) {
    impl_->thread.join();
  } else {
    impl_->thread.detach();
    (void)impl_.release();  // the detached thread still uses it
  }
}

Status MetricsServer::Start(const std::string& listen) {
  std::string host;
  int port = 0;
  if (!ParseMetricsListen(listen, &host, &port))
    return Status::Error("--metrics-listen " + listen +
                         ": expected ADDR:PORT or PORT (e.g. 127.0.0.1:9464)");
  Impl* impl = impl_.get();
  impl->server.new_task_queue = [impl] {
    auto* pool = new BoundedPool(kMaxConnections, [impl] {
      std::lock_guard<std::mutex> l(impl->mu);
      impl->pool = nullptr;
    });
    std::lock_guard<std::mutex> l(impl->mu);
    impl->pool = pool;
    return pool;
  };
  impl->server.set_read_timeout(kClientTimeoutS, 0);
  impl->server.set_write_timeout(kClientTimeoutS, 0);
  impl->server.set_keep_alive_timeout(kClientTimeoutS);
  impl->server.set_keep_alive_max_count(kKeepAliveRequests);
  impl->server.set_payload_max_length(1024);  // a scrape has no body
  impl->server.Get("/metrics", [impl](const httplib::Request&, httplib::Response& res) {
    std::lock_guard<std::mutex> lock(impl->mu);
    res.set_content(impl->text, "text/plain; version=0.0.4; charset=utf-8");
  });
  if (!impl->server.bind_to_port(host, port))
    return Status::Error("--metrics-listen " + listen +
                         ": cannot listen there (in use, or not an address of this machine)");
  std::promise<void> done;
  impl->done = done.get_future();
  impl->thread = std::thread([impl, done = std::move(done)]() mutable {
    impl->server.listen_after_bind();
    done.set_value();
  });
  return Status::OK();
}

void MetricsServer::Publish(std::string text) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->text = std::move(text);
}

}  // namespace fleet
