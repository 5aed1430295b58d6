// The JSON document fleet-probe prints on a node. Facts that parse must
// survive the state's round trip (GpuFactsFromJson(GpuFactsToJson(f)) == f).
#include "fuzz/fuzz_support.h"
#include "providers/shared/gpu_facts.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace fleet;
  GpuFacts facts;
  std::string error;
  if (!ParseProbeJson(fuzz::AsText(data, size), &facts, &error)) {
    FUZZ_CHECK(!error.empty());
    return 0;
  }
  const nlohmann::json j = GpuFactsToJson(facts);
  GpuFacts back;
  FUZZ_CHECK(GpuFactsFromJson(nlohmann::json::parse(j.dump()), &back, &error));
  FUZZ_CHECK(back == facts);
  (void)DescribeGpuMemory(facts);
  return 0;
}
