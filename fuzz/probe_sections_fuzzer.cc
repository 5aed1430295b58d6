// The one probe script's output split back into sections by its markers
// (whatever the fragments printed, including fake markers).
#include "fuzz/fuzz_support.h"
#include "src/engine/probe_script.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace fleet;
  static const std::string kNonce = "3f2a9c0d1e4b5a6978695a4b3c2d1e0f";
  auto sections = SplitProbeOutput(std::string(fuzz::AsText(data, size)), kNonce);
  for (const auto& [address, section] : sections) (void)section.output.size();
  return 0;
}
