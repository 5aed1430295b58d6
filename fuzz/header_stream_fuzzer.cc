// The framed stream a node prints for a snapshot's safetensors headers and
// indexes (hub_remote ReadSnapshotHeaders).
#include "fuzz/fuzz_support.h"
#include "providers/shared/hub_remote.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace fleet;
  Result<SnapshotHeaders> h = ParseHeaderStream(std::string(fuzz::AsText(data, size)));
  if (!h.ok()) FUZZ_CHECK(!h.status().message().empty());
  return 0;
}
