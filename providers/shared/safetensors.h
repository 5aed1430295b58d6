// Safetensors headers: the check that a shard is whole without reading it.
//
// A .safetensors file is: 8 bytes little-endian N, then N bytes of JSON
// (tensor name -> {dtype, shape, data_offsets: [begin, end]}, plus an
// optional "__metadata__" map of strings), then the data. A shard that a
// download cut short, or a file that only has the right name, fails here:
// the header's offsets must tile the data exactly (what the reference
// implementation requires before it maps a file), so the data length must
// equal file size - 8 - N.
#ifndef FLEET_PROVIDERS_SHARED_SAFETENSORS_H_
#define FLEET_PROVIDERS_SHARED_SAFETENSORS_H_

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "src/status.h"

namespace fleet {

// The reference implementation refuses headers above 100 MB.
constexpr uint64_t kMaxSafetensorsHeader = 100'000'000;

struct SafetensorsTensor {
  std::string name;
  std::string dtype;
  std::vector<uint64_t> shape;
  uint64_t begin = 0;  // data_offsets, relative to the start of the data
  uint64_t end = 0;
};

struct SafetensorsHeader {
  uint64_t header_length = 0;              // N
  std::vector<SafetensorsTensor> tensors;  // sorted by begin offset
  std::map<std::string, std::string> metadata;
  uint64_t data_length = 0;  // max end offset
};

// Bits per element of a safetensors dtype ("BF16" -> 16, "F4" -> 4); 0 for
// an unknown dtype.
int SafetensorsDtypeBits(std::string_view dtype);

// Reads the 8-byte little-endian header length. REQUIRES: prefix.size() >= 8.
uint64_t SafetensorsHeaderLength(std::string_view prefix);

// Checks the header JSON `json` (the N bytes after the length) of a file of
// `file_size` bytes. Errors say what is wrong in operator terms ("tensor
// 'x' ends at byte 100 of the data, the file holds 60 bytes of data:
// truncated?"). Never throws, whatever the bytes.
Result<SafetensorsHeader> ParseSafetensorsHeader(std::string_view json, uint64_t header_length,
                                                 uint64_t file_size);

// The same from the first bytes of the file (length prefix + header; more
// bytes after the header are ignored).
Result<SafetensorsHeader> ParseSafetensorsPrefix(std::string_view prefix, uint64_t file_size);

}  // namespace fleet

#endif  // FLEET_PROVIDERS_SHARED_SAFETENSORS_H_
