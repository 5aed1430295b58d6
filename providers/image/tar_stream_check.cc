#include "providers/image/tar_stream_check.h"

#include <algorithm>
#include <cstring>

namespace fleet {

namespace {

constexpr size_t kBlock = 512;

bool AllZero(const char* p, size_t n) {
  return std::all_of(p, p + n, [](char c) { return c == 0; });
}

// A numeric header field: octal digits (NUL/space padded), or GNU base-256
// when the first byte has its high bit set (sizes of 8 GiB and more).
bool ParseNumber(const char* field, size_t len, uint64_t* out) {
  const auto* u = reinterpret_cast<const unsigned char*>(field);
  if (u[0] & 0x80) {
    uint64_t v = u[0] & 0x7f;
    for (size_t i = 1; i < len; ++i) {
      if (v >> 56) return false;  // would overflow
      v = (v << 8) | u[i];
    }
    *out = v;
    return true;
  }
  uint64_t v = 0;
  size_t i = 0;
  while (i < len && field[i] == ' ') ++i;
  bool any = false;
  for (; i < len && field[i] >= '0' && field[i] <= '7'; ++i) {
    v = v * 8 + static_cast<uint64_t>(field[i] - '0');
    any = true;
  }
  for (; i < len; ++i)
    if (field[i] != ' ' && field[i] != '\0') return false;
  *out = v;
  return any;
}

}  // namespace

void TarStreamCheck::OnHeader() {
  if (AllZero(block_, kBlock)) {
    state_ = State::kSecondZero;
    return;
  }
  uint64_t want = 0, size = 0;
  if (!ParseNumber(block_ + 148, 8, &want)) {
    error_ = "malformed tar header checksum field at byte " + std::to_string(bytes_ - kBlock);
    return;
  }
  uint64_t sum = 0;
  for (size_t i = 0; i < kBlock; ++i)
    sum += (i >= 148 && i < 156) ? ' ' : static_cast<unsigned char>(block_[i]);
  if (sum != want) {
    error_ = "tar header checksum mismatch at byte " + std::to_string(bytes_ - kBlock);
    return;
  }
  if (!ParseNumber(block_ + 124, 12, &size)) {
    error_ = "malformed tar size field at byte " + std::to_string(bytes_ - kBlock);
    return;
  }
  ++entries_;
  // Links, directories and the like carry no data whatever the size says.
  const char type = block_[156];
  if (type == '1' || type == '2' || type == '3' || type == '4' || type == '5' || type == '6')
    size = 0;
  skip_ = (size + kBlock - 1) / kBlock * kBlock;
  state_ = skip_ > 0 ? State::kBody : State::kHeader;
}

void TarStreamCheck::Feed(std::string_view data) {
  bytes_ += data.size();
  while (!data.empty() && error_.empty()) {
    switch (state_) {
      case State::kBody: {
        size_t n = static_cast<size_t>(std::min<uint64_t>(skip_, data.size()));
        skip_ -= n;
        data.remove_prefix(n);
        if (skip_ == 0) state_ = State::kHeader;
        break;
      }
      case State::kHeader:
      case State::kSecondZero: {
        size_t n = std::min(kBlock - have_, data.size());
        memcpy(block_ + have_, data.data(), n);
        have_ += n;
        data.remove_prefix(n);
        if (have_ < kBlock) break;
        have_ = 0;
        if (state_ == State::kHeader) {
          // bytes_ already counts all of `data`: point at this block.
          uint64_t saved = bytes_;
          bytes_ = bytes_ - data.size();
          OnHeader();
          bytes_ = saved;
        } else if (AllZero(block_, kBlock)) {
          state_ = State::kDone;
        } else {
          error_ = "tar stream has a lone zero block before more data";
        }
        break;
      }
      case State::kDone:
        // Writers may pad the archive to a record size with zeros.
        if (!AllZero(data.data(), data.size())) error_ = "data after the end of the tar archive";
        data = {};
        break;
    }
  }
}

std::string TarStreamCheck::Problem() const {
  if (!error_.empty()) return error_;
  if (state_ == State::kDone) return "";
  if (bytes_ == 0) return "the stream was empty";
  std::string where = state_ == State::kBody
                          ? "inside an entry (" + std::to_string(skip_) + " bytes of it missing)"
                          : "without the end-of-archive marker";
  return "the archive stopped after " + std::to_string(bytes_) + " bytes, " + where;
}

}  // namespace fleet
