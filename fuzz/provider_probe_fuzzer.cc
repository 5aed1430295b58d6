// One provider's probe output parser (Provider::ParseProbe), then its diff:
// built once per provider type (FLEET_FUZZ_TYPE, e.g. "image"). The desired
// resources are those of examples/spark-lab; the first input byte picks
// one, the rest is what its probe fragment printed on the node. The node's
// facts come from the real facts of a simulated node. Whatever the node
// prints, parsing and diffing return, and what they produce can be printed
// into a saved plan as fleet prints it (fuzz::JsonText).
#include <vector>

#include "fuzz/fuzz_support.h"
#include "manifests/manifest.h"
#include "providers/node/node_provider.h"
#include "src/plan.h"
#include "src/provider.h"

namespace fleet::fuzz {
namespace {

struct Fixture {
  Manifest manifest;
  std::unique_ptr<Provider> provider;
  std::vector<DesiredResource> resources;
  std::map<std::string, NodeFacts> facts;
};

// What a converged simulated node's facts section looks like.
constexpr char kNodeFacts[] =
    "hostname=dgx1\nmachine_id=0123456789abcdef0123456789abcdef\n"
    "boot_id=6c1b3a52-2f0e-4a57-9b1e-3c4d5e6f7a8b\narch=aarch64\nkernel=6.11.0-1016-nvidia\n";

const Fixture& GetFixture() {
  static const Fixture* fixture = [] {
    auto* f = new Fixture;
    Diagnostics diags;
    if (!LoadManifest(std::string(SourceRoot()) + "/examples/spark-lab", &f->manifest, &diags)) {
      std::fprintf(stderr, "examples/spark-lab does not load\n");
      std::abort();
    }
    for (auto& p : MakeProviders())
      if (p->type() == FLEET_FUZZ_TYPE) f->provider = std::move(p);
    FUZZ_CHECK(f->provider != nullptr);
    f->resources = f->provider->Expand(f->manifest);
    FUZZ_CHECK(!f->resources.empty());
    for (const auto& [name, spec] : f->manifest.nodes) {
      f->facts[name] = ParseNodeFacts(kNodeFacts);
      f->facts[name].reachable = true;
      f->facts[name].hostname = spec.hostname.empty() ? name : spec.hostname;
    }
    return f;
  }();
  return *fixture;
}

}  // namespace
}  // namespace fleet::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace fleet;
  if (size < 1) return 0;
  const fuzz::Fixture& f = fuzz::GetFixture();
  const DesiredResource& r = f.resources[data[0] % f.resources.size()];
  const std::string output(fuzz::AsText(data + 1, size - 1));
  bool exact = true;  // what fleet prints need not read back the same
  NodeFacts parsed_facts;
  const NodeFacts* node_facts = &f.facts.at(r.node);
  if (std::string_view(FLEET_FUZZ_TYPE) == "node") {  // the facts section is the input
    parsed_facts = ParseNodeFacts(output);
    parsed_facts.reachable = true;
    (void)fuzz::JsonText(parsed_facts.ToJson(), &exact);
    node_facts = &parsed_facts;
  }
  const NodeFacts& facts = *node_facts;
  std::map<std::string, ActualResource> all_actual;  // what was probed, moved in (not copied)
  const ActualResource& actual = all_actual[r.address] = f.provider->ParseProbe(r, output, facts);
  (void)fuzz::JsonText(actual.attributes, &exact);
  DiffContext ctx{facts, &f.facts, &all_actual, &f.manifest, false, nullptr};
  Plan plan;
  plan.changes.push_back(f.provider->Diff(r, actual, nullptr, ctx));
  plan.changes.push_back(f.provider->DiffDestroy(r, actual, nullptr, ctx));
  (void)fuzz::JsonText(plan.ToJson(), &exact);
  return 0;
}
