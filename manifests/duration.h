// Durations as the manifest writes them: "30m", "90s", "2h", "1h30m", or a
// plain integer meaning seconds.
#ifndef FLEET_MANIFESTS_DURATION_H_
#define FLEET_MANIFESTS_DURATION_H_

#include <optional>
#include <string_view>

namespace fleet {

// Returns the duration in seconds, or nullopt when `text` is not a positive
// duration (empty, a unit other than s/m/h, a fraction, a sign, overflow
// beyond ~68 years). Never throws.
std::optional<int> ParseDurationSeconds(std::string_view text);

}  // namespace fleet

#endif  // FLEET_MANIFESTS_DURATION_H_
