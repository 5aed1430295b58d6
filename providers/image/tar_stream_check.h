// TarStreamCheck: follows a tar stream as it passes through the controller
// and says whether it ended properly (the two zero blocks that close an
// archive) without holding any of it.
//
// Why: `podman load` of an archive cut at a file boundary can succeed (Go's
// tar reader takes a missing end marker as a normal end), so the exit status
// of load alone does not prove the copy was whole; and a source whose `save`
// died half way may still exit 0 behind a pipe. Headers are checked (checksum,
// size field), bodies are skipped by their size: cost is one pass over the
// 512-byte headers only.
#ifndef FLEET_PROVIDERS_IMAGE_TAR_STREAM_CHECK_H_
#define FLEET_PROVIDERS_IMAGE_TAR_STREAM_CHECK_H_

#include <cstdint>
#include <string>
#include <string_view>

namespace fleet {

class TarStreamCheck {
 public:
  // Feeds the next bytes of the stream.
  void Feed(std::string_view data);

  // The end-of-archive marker was seen after well-formed entries.
  bool complete() const { return state_ == State::kDone && error_.empty(); }
  // Non-empty once the stream is known to be broken (bad header checksum,
  // data after the end marker).
  const std::string& error() const { return error_; }
  uint64_t bytes() const { return bytes_; }
  uint64_t entries() const { return entries_; }

  // Why the stream is not a whole archive ("" when complete()).
  std::string Problem() const;

 private:
  enum class State { kHeader, kBody, kSecondZero, kDone };
  void OnHeader();

  State state_ = State::kHeader;
  char block_[512];
  size_t have_ = 0;    // bytes of block_ filled (kHeader, kSecondZero)
  uint64_t skip_ = 0;  // body bytes (with padding) still to skip (kBody)
  uint64_t bytes_ = 0;
  uint64_t entries_ = 0;
  std::string error_;
};

}  // namespace fleet

#endif  // FLEET_PROVIDERS_IMAGE_TAR_STREAM_CHECK_H_
