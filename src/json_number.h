// Whole numbers read from JSON that fleet did not write itself (a saved
// plan, the state, what a node or a serve printed). nlohmann::json parses an
// integer too large for 64 bits as a double, and get<T>() (or value(key, T))
// of a double out of T's range is undefined behaviour (the plan fuzzer found
// a saved plan whose serial was 4.7e62); a negative integer wraps into an
// unsigned T, a fraction is cut.
#ifndef FLEET_SRC_JSON_NUMBER_H_
#define FLEET_SRC_JSON_NUMBER_H_

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <type_traits>
#include <utility>

namespace fleet {

// The value when `v` is an integer that T can hold, else nullopt (a double,
// even 3.0, a number out of T's range, anything not a number). Header-only:
// the state library depends on no other fleet library.
template <class T>
std::optional<T> JsonInteger(const nlohmann::json& v) {
  static_assert(std::is_integral_v<T> && !std::is_same_v<T, bool>);
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    if (std::in_range<T>(u)) return static_cast<T>(u);
  } else if (v.is_number_integer()) {
    const int64_t i = v.get<int64_t>();
    if (std::in_range<T>(i)) return static_cast<T>(i);
  }
  return std::nullopt;
}

inline std::optional<uint64_t> NonNegativeInteger(const nlohmann::json& v) {
  return JsonInteger<uint64_t>(v);
}

// `obj[key]` when it is an integer that T can hold, else nullopt (the key
// missing, null, of another type or out of range; `obj` not an object).
template <class T>
std::optional<T> OptionalInteger(const nlohmann::json& obj, const char* key) {
  if (!obj.is_object()) return std::nullopt;
  const auto it = obj.find(key);
  if (it == obj.end()) return std::nullopt;
  return JsonInteger<T>(*it);
}

// OptionalInteger or `fallback`. The drop-in for obj.value(key, fallback)
// where the JSON may be hostile: it never throws and never converts out of
// range.
template <class T>
T IntegerOr(const nlohmann::json& obj, const char* key, T fallback) {
  return OptionalInteger<T>(obj, key).value_or(fallback);
}

}  // namespace fleet

#endif  // FLEET_SRC_JSON_NUMBER_H_
