// StreamCopy: pipes one node's command output into another node's command
// input through the controller, without landing the data on the
// controller's disk (images are tens of GB).
//
// The source runs under Transport::RunStreaming on one thread and fills a
// bounded queue; the target runs under Transport::RunWithInput on the
// calling thread and drains it, so memory stays bounded and both ends move
// at the pace of the slower one. When either side stops (error, abort, early
// exit), the other is stopped too: nothing waits forever on a full or an
// empty queue.
#ifndef FLEET_PROVIDERS_IMAGE_STREAM_COPY_H_
#define FLEET_PROVIDERS_IMAGE_STREAM_COPY_H_

#include <cstdint>
#include <functional>
#include <string>

#include "src/clock.h"
#include "src/status.h"
#include "src/transport.h"

namespace fleet {

struct StreamCopyOptions {
  size_t queue_bytes = 32u << 20;  // data held between the two sides, at most (+ one chunk)
  size_t max_piece = 1u << 20;     // largest piece handed to the target at once
  // Follow the stream as a tar archive and report one that did not end
  // properly (see TarStreamCheck).
  bool check_tar = true;
  // Called on the calling thread with the bytes delivered so far, at most
  // once per `progress_every` bytes.
  std::function<void(uint64_t bytes)> on_progress;
  uint64_t progress_every = 1ull << 30;
  // Times the copy (StreamCopyResult::seconds): the step's
  // (StepContext::clock). Never null.
  Clock* clock = RealClock();
};

struct StreamCopyResult {
  Result<CommandResult> source = Status::Error("not run");
  Result<CommandResult> target = Status::Error("not run");
  uint64_t bytes = 0;       // delivered to the target
  std::string tar_problem;  // "" when check_tar is off or the archive was whole
  double seconds = 0;

  // Both commands ran and exited 0, and the stream was whole.
  bool ok() const;
  // What went wrong, naming the side ("" when ok()).
  std::string Problem() const;
};

// Runs `source_cmd` on `source` and `target_cmd` on `target`, the first's
// stdout feeding the second's stdin. Both transports must be connected and
// distinct. Blocks until both commands are over.
StreamCopyResult StreamCopy(Transport* source, const std::string& source_cmd, Transport* target,
                            const std::string& target_cmd, const StreamCopyOptions& options = {});

}  // namespace fleet

#endif  // FLEET_PROVIDERS_IMAGE_STREAM_COPY_H_
