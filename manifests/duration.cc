#include "manifests/duration.h"

#include <cstdint>

namespace fleet {

std::optional<int> ParseDurationSeconds(std::string_view text, int min_seconds) {
  if (text.empty()) return std::nullopt;
  int64_t total = 0;
  size_t i = 0;
  bool any_unit = false;
  while (i < text.size()) {
    if (text[i] < '0' || text[i] > '9') return std::nullopt;
    int64_t number = 0;
    while (i < text.size() && text[i] >= '0' && text[i] <= '9') {
      number = number * 10 + (text[i] - '0');
      if (number > INT32_MAX) return std::nullopt;
      ++i;
    }
    int64_t scale = 1;
    if (i == text.size()) {
      // A bare trailing number is seconds only when it is the whole text:
      // "1h30" is ambiguous (minutes? seconds?), so refuse it.
      if (any_unit) return std::nullopt;
    } else {
      switch (text[i]) {
        case 's':
          scale = 1;
          break;
        case 'm':
          scale = 60;
          break;
        case 'h':
          scale = 3600;
          break;
        default:
          return std::nullopt;
      }
      ++i;
      any_unit = true;
    }
    total += number * scale;
    if (total > INT32_MAX) return std::nullopt;
  }
  if (total < min_seconds) return std::nullopt;
  return static_cast<int>(total);
}

}  // namespace fleet
