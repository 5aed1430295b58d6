// Image refs (what a manifest names) and image IDs/digests (what a node
// prints): split, re-joined and shortened without crashing.
#include "fuzz/fuzz_support.h"
#include "providers/shared/image_ref.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace fleet;
  std::string_view text = fuzz::AsText(data, size);
  ImageRef ref = ParseImageRef(text);
  (void)ref.Lookup();
  (void)ref.FleetTag();
  (void)ref.TaggedName();
  const std::string id = NormalizeImageId(text);
  FUZZ_CHECK(id.empty() || id.size() == 71);  // "sha256:" + 64 hex
  (void)ShortId(text);
  (void)HasRepoDigest({std::string(text)}, "sha256:" + std::string(64, 'a'));
  return 0;
}
