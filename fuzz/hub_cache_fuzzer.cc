// The hub cache listing the model probe prints (refs/, snapshots/, blobs/).
// What parses must survive the plan file's JSON round trip.
#include "fuzz/fuzz_support.h"
#include "providers/shared/hub_cache.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace fleet;
  HubProbe p = ParseHubProbe(std::string(fuzz::AsText(data, size)));
  const nlohmann::json once = p.ToJson();
  bool exact = true;
  const std::string printed = fuzz::JsonText(once, &exact);  // as plans hold it
  const nlohmann::json back = HubProbe::FromJson(nlohmann::json::parse(printed)).ToJson();
  if (exact) FUZZ_CHECK(back == once);
  return 0;
}
