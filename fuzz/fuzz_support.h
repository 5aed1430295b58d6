// What the fuzz targets share: the example fleet they parse probe output
// for, and a private scratch folder for the parsers that read files.
//
// Every target is a libFuzzer entry point (LLVMFuzzerTestOneInput) built
// with ASan and UBSan (meson -Dfuzz=true). A target fails by crashing: a
// sanitizer report, an exception escaping a parser (fleet's parsers return
// Status, they never throw), or FUZZ_CHECK of a property the parser's
// header promises.
#ifndef FLEET_FUZZ_FUZZ_SUPPORT_H_
#define FLEET_FUZZ_FUZZ_SUPPORT_H_

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace fleet::fuzz {

// Aborts (a finding) when `cond` is false, naming the property.
#define FUZZ_CHECK(cond)                                                                 \
  do {                                                                                   \
    if (!(cond)) {                                                                       \
      std::fprintf(stderr, "%s:%d: FUZZ_CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                                      \
    }                                                                                    \
  } while (0)

inline std::string_view AsText(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// A folder of this process under $TMPDIR (or /tmp), created on first use and
// removed at exit.
const std::string& ScratchDir();

// Writes `text` to `path`, replacing it.
void WriteFileOrDie(const std::string& path, std::string_view text);

// The text fleet writes for `j` into plans and state: bytes that are not
// UTF-8 (which a node may print) become U+FFFD there rather than throwing.
// Sets *exact to false when something was replaced (the document then does
// not read back the same, by design).
std::string JsonText(const nlohmann::json& j, bool* exact);

// The repository root this build was configured from.
const char* SourceRoot();

}  // namespace fleet::fuzz

#endif  // FLEET_FUZZ_FUZZ_SUPPORT_H_
