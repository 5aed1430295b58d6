#include "manifests/utf8.h"

#include <cstdio>

namespace fleet {

size_t Utf8SequenceLength(std::string_view text, size_t i) {
  const auto lead = static_cast<unsigned char>(text[i]);
  if (lead < 0x80) return 1;
  size_t length = 0;
  unsigned char low = 0x80, high = 0xBF;  // the range of the second byte
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3;
    if (lead == 0xE0) low = 0xA0;   // overlong
    if (lead == 0xED) high = 0x9F;  // surrogates
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4;
    if (lead == 0xF0) low = 0x90;   // overlong
    if (lead == 0xF4) high = 0x8F;  // past U+10FFFF
  } else {
    return 0;
  }
  if (text.size() - i < length) return 0;
  for (size_t k = 1; k < length; ++k) {
    const auto b = static_cast<unsigned char>(text[i + k]);
    if (b < (k == 1 ? low : 0x80) || b > (k == 1 ? high : 0xBF)) return 0;
  }
  return length;
}

namespace {

// The code point of the well-formed sequence of `length` bytes at text[i].
char32_t CodePoint(std::string_view text, size_t i, size_t length) {
  static constexpr unsigned char kLeadBits[] = {0, 0x7F, 0x1F, 0x0F, 0x07};
  char32_t c = static_cast<unsigned char>(text[i]) & kLeadBits[length];
  for (size_t k = 1; k < length; ++k)
    c = (c << 6) | (static_cast<unsigned char>(text[i + k]) & 0x3F);
  return c;
}

bool IsYamlPrintable(char32_t c) {
  if (c == '\t' || c == '\n' || c == '\r' || c == 0x85) return true;
  if (c < 0x20 || (c >= 0x7F && c < 0xA0)) return false;  // C0, DEL, C1
  return c != 0xFFFE && c != 0xFFFF;                      // surrogates are not UTF-8 already
}

}  // namespace

size_t FirstNonPrintable(std::string_view text) {
  for (size_t i = 0; i < text.size();) {
    const size_t length = Utf8SequenceLength(text, i);
    if (length == 0 || !IsYamlPrintable(CodePoint(text, i, length))) return i;
    i += length;
  }
  return std::string_view::npos;
}

std::string DescribeNonPrintable(std::string_view text, size_t at) {
  char what[48];
  const size_t length = Utf8SequenceLength(text, at);
  if (length == 0) {
    std::snprintf(what, sizeof(what), "byte 0x%02X is not UTF-8",
                  static_cast<unsigned char>(text[at]));
  } else {
    const char32_t c = CodePoint(text, at, length);
    std::snprintf(what, sizeof(what), "U+%04X is %s", static_cast<unsigned>(c),
                  c < 0xA0 ? "a control character" : "not a character");
  }
  return what;
}

}  // namespace fleet
