// Durations as the manifest writes them: "30m", "90s", "2h", "1h30m", or a
// plain integer meaning seconds.
#ifndef FLEET_MANIFESTS_DURATION_H_
#define FLEET_MANIFESTS_DURATION_H_

#include <optional>
#include <string_view>

namespace fleet {

// Returns the duration in seconds, or nullopt when `text` is not a duration
// of at least `min_seconds` (empty, a unit other than s/m/h, a fraction, a
// sign, overflow beyond ~68 years, too short). Timeouts keep the default,
// 1: a zero timeout is a typo. A wait that may be skipped passes 0.
// REQUIRES: min_seconds >= 0. Never throws.
std::optional<int> ParseDurationSeconds(std::string_view text, int min_seconds = 1);

}  // namespace fleet

#endif  // FLEET_MANIFESTS_DURATION_H_
