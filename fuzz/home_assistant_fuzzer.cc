// Home Assistant's answers to the power switch: the HTTP status (first two
// bytes) and the body, read as GET /api/states/<entity> reads them.
#include "fuzz/fuzz_support.h"
#include "src/power_switch.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace fleet;
  if (size < 2) return 0;
  const long code = 100 + (data[0] | data[1] << 8) % 500;
  const std::string body(fuzz::AsText(data + 2, size - 2));
  const std::string where = "power controller http://127.0.0.1:8123 (switch.dgx1)";
  Result<nlohmann::json> answer = ReadHomeAssistantAnswer(code, body, "GET /api/states/x", where);
  if (!answer.ok()) {
    FUZZ_CHECK(answer.status().message().rfind(where, 0) == 0);
    return 0;
  }
  Result<std::string> state = HomeAssistantState(*answer, where);
  if (!state.ok()) FUZZ_CHECK(state.status().message().rfind(where, 0) == 0);
  return 0;
}
