// The state file: the local store's Load on the bytes as the state file.
// A state that loads must save and load back to the same document.
#include "fuzz/fuzz_support.h"
#include "state/state_store.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace fleet;
  static const std::string path = fuzz::ScratchDir() + "/state.json";
  fuzz::WriteFileOrDie(path, fuzz::AsText(data, size));
  auto store = MakeLocalStateStore(path);
  Result<State> state = store->Load();
  if (!state.ok()) {
    FUZZ_CHECK(!state.status().message().empty());
    return 0;
  }
  const nlohmann::json once = state->ToJson();
  Result<State> again = State::FromJson(nlohmann::json::parse(once.dump()));
  FUZZ_CHECK(again.ok());
  FUZZ_CHECK(again->ToJson() == once);
  return 0;
}
