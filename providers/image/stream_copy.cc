#include "providers/image/stream_copy.h"

#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

#include "providers/image/tar_stream_check.h"
#include "providers/shared/cli_error.h"

namespace fleet {

namespace {

// Bytes in flight between the producer (source) and the consumer (target).
class ByteQueue {
 public:
  ByteQueue(size_t capacity, Clock* clock) : capacity_(capacity), clock_(clock) {}

  // Blocks while full. False once the consumer cancelled: stop producing.
  bool Push(std::string_view data) {
    std::unique_lock<std::mutex> lock(mu_);
    not_full_.wait(lock, [&] { return cancelled_ || size_ < capacity_; });
    if (cancelled_) return false;
    chunks_.emplace_back(data);
    size_ += data.size();
    not_empty_.notify_one();
    return true;
  }

  // The producer is done (whatever the reason).
  void Finish() {
    std::lock_guard<std::mutex> lock(mu_);
    finished_ = true;
    not_empty_.notify_all();
  }

  // The consumer is done: the producer's next Push fails.
  void Cancel() {
    std::lock_guard<std::mutex> lock(mu_);
    cancelled_ = true;
    chunks_.clear();
    size_ = 0;
    not_full_.notify_all();
  }

  enum class Pop { kData, kNothingYet, kEnd };
  // Moves up to `max` bytes (whole chunks; at least one) into *out.
  Pop Take(std::string* out, size_t max, std::chrono::milliseconds wait) {
    std::unique_lock<std::mutex> lock(mu_);
    if (!clock_->WaitOn(not_empty_, lock, wait, [&] { return !chunks_.empty() || finished_; }))
      return Pop::kNothingYet;
    if (chunks_.empty()) return Pop::kEnd;
    out->clear();
    if (chunks_.front().size() >= max) {
      out->swap(chunks_.front());
      chunks_.pop_front();
    } else {
      while (!chunks_.empty() && out->size() + chunks_.front().size() <= max) {
        out->append(chunks_.front());
        chunks_.pop_front();
      }
    }
    size_ -= out->size();
    not_full_.notify_one();
    return Pop::kData;
  }

 private:
  const size_t capacity_;
  std::mutex mu_;
  std::condition_variable not_full_, not_empty_;
  std::deque<std::string> chunks_;
  Clock* clock_;
  size_t size_ = 0;
  bool finished_ = false;
  bool cancelled_ = false;
};

std::string Side(const char* name, const Result<CommandResult>& r) {
  if (!r.ok()) return std::string(name) + ": " + r.status().message();
  if (r->exit_code == 0) return "";
  std::string s = std::string(name) + " exited " + std::to_string(r->exit_code);
  std::string why = CliErrorText(r->err.empty() ? r->out : r->err);
  if (!why.empty()) s += ": " + why;
  return s;
}

}  // namespace

bool StreamCopyResult::ok() const { return Problem().empty(); }

std::string StreamCopyResult::Problem() const {
  std::string p;
  auto add = [&](const std::string& s) {
    if (s.empty()) return;
    if (!p.empty()) p += "; ";
    p += s;
  };
  // The stream's problem first: when the source stopped short, that is the
  // cause and the target's complaint the consequence.
  if (!tar_problem.empty()) add("stream: " + tar_problem);
  add(Side("source", source));
  add(Side("target", target));
  return p;
}

StreamCopyResult StreamCopy(Transport* source, const std::string& source_cmd, Transport* target,
                            const std::string& target_cmd, const StreamCopyOptions& options) {
  StreamCopyResult result;
  const auto start = options.clock->SteadyNow();
  ByteQueue queue(options.queue_bytes, options.clock);
  TarStreamCheck tar;

  std::thread producer([&] {
    result.source = source->RunStreaming(source_cmd, [&](std::string_view chunk) {
      if (options.check_tar) tar.Feed(chunk);
      return queue.Push(chunk);
    });
    queue.Finish();
  });

  uint64_t next_report = options.progress_every;
  result.target = target->RunWithInput(target_cmd, [&](std::string* piece) {
    switch (queue.Take(piece, options.max_piece, std::chrono::milliseconds(250))) {
      case ByteQueue::Pop::kData:
        result.bytes += piece->size();
        if (options.on_progress && result.bytes >= next_report) {
          options.on_progress(result.bytes);
          next_report = result.bytes + options.progress_every;
        }
        return true;
      case ByteQueue::Pop::kNothingYet:
        // Hand back an empty piece: the transport gets to drain the
        // target's output while the source is slow.
        piece->clear();
        return true;
      case ByteQueue::Pop::kEnd:
        break;
    }
    return false;
  });
  // Whatever made the target stop, the source must not block on a full queue.
  queue.Cancel();
  producer.join();

  if (options.check_tar) result.tar_problem = tar.Problem();
  result.seconds = std::chrono::duration<double>(options.clock->SteadyNow() - start).count();
  return result;
}

}  // namespace fleet
