// Whether a manifest's bytes are UTF-8 text. YAML is Unicode text, but
// yaml-cpp passes any byte through; a byte that is not UTF-8 then reached
// JSON (the switch entity Home Assistant is sent, a deployment's spec
// hash), where nlohmann's dump() throws and fleet crashed. The loader
// refuses such a file at the byte's file:line:column instead.
//
// YAML also forbids most control characters (its c-printable set), and an
// escape can produce one after that check: yaml-cpp decodes "\N" to the
// lone byte 0x85 and "\0" to NUL. So the loader checks the raw text and
// every decoded scalar with FirstNonPrintable.
#ifndef FLEET_MANIFESTS_UTF8_H_
#define FLEET_MANIFESTS_UTF8_H_

#include <cstddef>
#include <string>
#include <string_view>

namespace fleet {

// The length of the well-formed UTF-8 sequence (RFC 3629) that starts at
// text[i], or 0 when none does. REQUIRES: i < text.size().
size_t Utf8SequenceLength(std::string_view text, size_t i);

// The offset of the first byte of `text` that starts neither well-formed
// UTF-8 (RFC 3629: no overlong forms, no surrogates, nothing past
// U+10FFFF, no sequence cut short) nor a character in YAML 1.2's
// c-printable set (tab, LF, CR, U+0020-U+007E, U+0085, U+00A0-U+D7FF,
// U+E000-U+FFFD, U+10000 and up), or std::string_view::npos when none does.
size_t FirstNonPrintable(std::string_view text);

// What is at text[at], for an error: "byte 0xCB is not UTF-8",
// "U+0016 is a control character" or "U+FFFE is not a character".
// REQUIRES: at < text.size().
std::string DescribeNonPrintable(std::string_view text, size_t at);

}  // namespace fleet

#endif  // FLEET_MANIFESTS_UTF8_H_
