#include "manifests/byte_size.h"

#include <cctype>
#include <cmath>
#include <cstdlib>
#include <string>

namespace fleet {

std::optional<uint64_t> ParseByteSize(std::string_view text) {
  size_t i = 0;
  bool dot = false, digits = false;
  while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.')) {
    if (text[i] == '.') {
      if (dot) return std::nullopt;
      dot = true;
    } else {
      digits = true;
    }
    ++i;
  }
  if (!digits) return std::nullopt;
  // strtod, not stod: a number too large for a double (a typo of 400
  // digits) is HUGE_VAL, refused below, where stod threw out of the loader.
  const double number = std::strtod(std::string(text.substr(0, i)).c_str(), nullptr);
  if (i + 1 < text.size() && text[i] == ' ') ++i;  // "2 GB", not "12 "
  int shift = 0;
  if (i < text.size()) {
    switch (std::tolower(static_cast<unsigned char>(text[i]))) {
      case 'k':
        shift = 10;
        break;
      case 'm':
        shift = 20;
        break;
      case 'g':
        shift = 30;
        break;
      case 't':
        shift = 40;
        break;
      case 'p':
        shift = 50;
        break;
      case 'b':
        shift = -1;
        break;  // "100b": bytes
      default:
        return std::nullopt;
    }
    ++i;
    if (shift > 0) {
      if (i < text.size() && (text[i] == 'i' || text[i] == 'I')) ++i;
      if (i < text.size() && (text[i] == 'b' || text[i] == 'B')) ++i;
    }
  }
  if (i != text.size()) return std::nullopt;
  const double bytes = std::ldexp(number, shift < 0 ? 0 : shift);
  if (!(bytes >= 1) || bytes >= 18446744073709551615.0) return std::nullopt;
  return static_cast<uint64_t>(bytes);
}

}  // namespace fleet
