// Whole numbers read from JSON that fleet did not write itself (a saved
// plan, the state, what a node printed). nlohmann::json parses an integer
// too large for 64 bits as a double, and get<uint64_t>() of a double out of
// range is undefined behaviour (the plan fuzzer found a saved plan whose
// serial was 4.7e62); a negative integer wraps, a fraction is cut.
#ifndef FLEET_SRC_JSON_NUMBER_H_
#define FLEET_SRC_JSON_NUMBER_H_

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>

namespace fleet {

// The value when `v` is an integer in [0, 2^64), else nullopt (a double,
// even 3.0, a negative number, anything not a number). Header-only: the
// state library depends on no other fleet library.
inline std::optional<uint64_t> NonNegativeInteger(const nlohmann::json& v) {
  if (v.is_number_unsigned()) return v.get<uint64_t>();
  if (v.is_number_integer() && v.get<int64_t>() >= 0)
    return static_cast<uint64_t>(v.get<int64_t>());
  return std::nullopt;
}

}  // namespace fleet

#endif  // FLEET_SRC_JSON_NUMBER_H_
