// The safetensors header parser, on the first bytes of a file: the 8-byte
// length, the header JSON, the data offsets against the file's size.
#include <cstring>

#include "fuzz/fuzz_support.h"
#include "providers/shared/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace fleet;
  std::string_view text = fuzz::AsText(data, size);
  // The file's size: the bytes given, or (a bit of the input) much larger.
  uint64_t file_size = size;
  if (size >= 1 && (data[0] & 1)) file_size += static_cast<uint64_t>(data[0]) << 20;
  Result<SafetensorsHeader> h = ParseSafetensorsPrefix(text, file_size);
  if (!h.ok()) FUZZ_CHECK(!h.status().message().empty());
  if (size >= 8) {
    const uint64_t length = SafetensorsHeaderLength(text);
    (void)ParseSafetensorsHeader(text.substr(8), length, file_size);
  }
  for (size_t i = 0; i + 1 < size && i < 8; i += 2) (void)SafetensorsDtypeBits(text.substr(i, 4));
  return 0;
}
