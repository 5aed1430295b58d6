// What a node's container CLI prints: `image inspect` (RepoDigests and Id,
// around warnings), the image probe fragment's lines, `load`'s output and
// CLI errors. The first byte is the exit status of `image inspect`.
#include "fuzz/fuzz_support.h"
#include "providers/image/image_steps.h"
#include "providers/shared/cli_error.h"
#include "providers/shared/image_probe.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace fleet;
  if (size < 1) return 0;
  const std::string output(fuzz::AsText(data + 1, size - 1));
  (void)ParseInspect(data[0] % 4 == 0 ? 0 : data[0], output);
  ImageProbe probe = ParseImageProbe(output);
  const nlohmann::json once = probe.ToJson();
  bool exact = true;
  const std::string printed = fuzz::JsonText(once, &exact);  // as plans hold it
  const nlohmann::json back = ImageProbe::FromJson(nlohmann::json::parse(printed)).ToJson();
  if (exact) FUZZ_CHECK(back == once);
  (void)ParseLoadedNames(output);
  const std::string error = CliErrorText(output, 1 + data[0]);
  FUZZ_CHECK(error.size() <= 1u + data[0] + 3);  // at most `max` (and an ellipsis)
  return 0;
}
