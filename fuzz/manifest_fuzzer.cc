// fleet.yaml: LoadManifest on the bytes as <dir>/fleet.yaml, beside the
// example fleet's recipes (so references to them resolve). Then, when the
// manifests are valid, every provider expands them and writes its probe
// fragments (the shell quoting of whatever names got through).
#include <filesystem>

#include "fuzz/fuzz_support.h"
#include "manifests/manifest.h"
#include "src/provider.h"

namespace fleet::fuzz {
namespace {

const std::string& ManifestDir() {
  static const std::string dir = [] {
    std::string d = ScratchDir() + "/manifest";
    std::filesystem::create_directories(d);
    std::filesystem::copy(std::string(SourceRoot()) + "/examples/spark-lab/recipes", d + "/recipes",
                          std::filesystem::copy_options::recursive);
    return d;
  }();
  return dir;
}

void ExpandAndProbe(const Manifest& m) {
  static const auto providers = MakeProviders();
  for (const auto& p : providers) {
    for (const DesiredResource& r : p->Expand(m)) {
      auto node = m.nodes.find(r.node);
      if (node != m.nodes.end()) (void)p->ProbeScript(r, node->second);
      (void)r.attributes.dump();
    }
  }
}

}  // namespace
}  // namespace fleet::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace fleet;
  const std::string& dir = fuzz::ManifestDir();
  fuzz::WriteFileOrDie(dir + "/fleet.yaml", fuzz::AsText(data, size));
  Manifest m;
  Diagnostics diags;
  const bool ok = LoadManifest(dir, &m, &diags);
  FUZZ_CHECK(ok == !HasErrors(diags));
  for (const Diagnostic& d : diags) {
    FUZZ_CHECK(!d.message.empty());
    FUZZ_CHECK(!d.loc.file.empty());  // every error names its file
  }
  if (ok) fuzz::ExpandAndProbe(m);
  return 0;
}
