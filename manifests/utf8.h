// Whether a manifest's bytes are UTF-8 text. YAML is Unicode text, but
// yaml-cpp passes any byte through; a byte that is not UTF-8 then reached
// JSON (the switch entity Home Assistant is sent, a deployment's spec
// hash), where nlohmann's dump() throws and fleet crashed. The loader
// refuses such a file at the byte's file:line:column instead.
#ifndef FLEET_MANIFESTS_UTF8_H_
#define FLEET_MANIFESTS_UTF8_H_

#include <cstddef>
#include <string_view>

namespace fleet {

// The length of the well-formed UTF-8 sequence (RFC 3629) that starts at
// text[i], or 0 when none does. REQUIRES: i < text.size().
size_t Utf8SequenceLength(std::string_view text, size_t i);

// The offset of the first byte of `text` that is not part of well-formed
// UTF-8 (RFC 3629: no overlong forms, no surrogates, nothing past
// U+10FFFF, no sequence cut short), or std::string_view::npos when all is.
size_t FirstNonUtf8(std::string_view text);

}  // namespace fleet

#endif  // FLEET_MANIFESTS_UTF8_H_
