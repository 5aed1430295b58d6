// Sizes as the manifest writes them: "24GiB", "24g", "512m", "1.5T", or a
// plain integer meaning bytes. Every unit is binary (k = 1024), as docker
// and podman read --memory: "24GB" is 24 GiB.
#ifndef FLEET_MANIFESTS_BYTE_SIZE_H_
#define FLEET_MANIFESTS_BYTE_SIZE_H_

#include <cstdint>
#include <optional>
#include <string_view>

namespace fleet {

// Returns the size in bytes, or nullopt when `text` is not a positive size
// (empty, an unknown unit, a sign, more than 16 EiB). Never throws.
std::optional<uint64_t> ParseByteSize(std::string_view text);

}  // namespace fleet

#endif  // FLEET_MANIFESTS_BYTE_SIZE_H_
