// A saved plan (`fleet plan -out FILE`): the JSON parse and Plan::FromJson
// that `fleet apply FILE` runs. A plan that loads must print and reload to
// the same document.
#include "fuzz/fuzz_support.h"
#include "src/plan.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace fleet;
  nlohmann::json j = nlohmann::json::parse(fuzz::AsText(data, size), nullptr, false);
  if (j.is_discarded()) return 0;
  Result<Plan> plan = Plan::FromJson(j);
  if (!plan.ok()) {
    FUZZ_CHECK(!plan.status().message().empty());
    return 0;
  }
  (void)plan->HasChanges();
  (void)plan->Summary();
  const nlohmann::json once = plan->ToJson();
  Result<Plan> again = Plan::FromJson(nlohmann::json::parse(once.dump()));
  FUZZ_CHECK(again.ok());
  FUZZ_CHECK(again->ToJson() == once);
  return 0;
}
