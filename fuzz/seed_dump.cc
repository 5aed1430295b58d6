// Writes real seeds for the probe, plan and state targets: runs the probe
// script of examples/spark-lab's resources here (the same read-only shell
// every node runs; this machine has no node layout, so most things read as
// absent), splits it as the planner does, and saves
//   <out>/probe_sections/<node>       the whole probe output of a node
//   <out>/<type>_probe/<address>      byte 0: the resource's index, then its section
//   <out>/plan/<node>.json            a plan of the diffs of those facts
//   <out>/state/<node>.json           a state recording what was probed
// and, given a hub cache (tests/integration/mkmodel.py writes one), what the
// model probe and the snapshot header reader print for that repository:
//   <out>/hub_cache/<repo>, <out>/header_stream/<repo>
// Usage: seed_dump OUT_DIR [HUB_CACHE REPO REVISION]. Not a fuzz target.
#include <filesystem>
#include <fstream>
#include <iostream>

#include "manifests/manifest.h"
#include "providers/node/node_provider.h"
#include "providers/shared/hub_remote.h"
#include "src/engine/probe_script.h"
#include "src/local_transport.h"
#include "src/plan.h"
#include "src/provider.h"
#include "state/state.h"

namespace fleet {
namespace {

namespace fs = std::filesystem;

void Save(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
}

// Keeps what every command printed.
class RecordingTransport : public LocalTransport {
 public:
  using LocalTransport::LocalTransport;
  Result<CommandResult> Run(const std::string& command, std::string_view stdin_data) override {
    Result<CommandResult> r = LocalTransport::Run(command, stdin_data);
    if (r.ok()) outputs.push_back(r->out);
    return r;
  }
  std::vector<std::string> outputs;
};

int DumpHub(const fs::path& out, const HubLocation& loc) {
  SshEndpoint here;
  here.node = "seed";
  here.address = "local";
  RecordingTransport t(here);
  if (!ProbeHub(&t, loc).ok() || !ReadSnapshotHeaders(&t, loc).ok() || t.outputs.size() != 2) {
    std::cerr << "cannot read " << loc.cache << "\n";
    return 1;
  }
  std::string name = loc.repo;
  for (char& c : name)
    if (c == '/') c = '-';
  Save(out / "hub_cache" / name, t.outputs[0]);
  Save(out / "header_stream" / name, t.outputs[1]);
  return 0;
}

int Main(const fs::path& out) {
  Manifest m;
  Diagnostics diags;
  if (!LoadManifest(FLEET_SOURCE_ROOT "/examples/spark-lab", &m, &diags)) return 1;
  auto providers = MakeProviders();
  const std::string nonce = "3f2a9c0d1e4b5a6978695a4b3c2d1e0f";  // probe_sections_fuzzer's
  SshEndpoint here;
  here.node = "seed";
  here.address = "local";
  LocalTransport local(here);
  for (const auto& [node, spec] : m.nodes) {
    std::vector<ProbeFragment> fragments;
    for (const auto& p : providers)
      for (const DesiredResource& r : p->Expand(m))
        if (r.node == node) fragments.push_back({r.address, p->ProbeScript(r, spec)});
    Result<CommandResult> run = local.Run(BuildProbeScript(fragments, nonce));
    if (!run.ok()) return 1;
    Save(out / "probe_sections" / node, run->out);
    auto sections = SplitProbeOutput(run->out, nonce);
    NodeFacts facts = ParseNodeFacts(sections[NodeAddress(node)].output);
    facts.reachable = true;
    std::map<std::string, NodeFacts> all_facts = {{node, facts}};
    std::map<std::string, ActualResource> actual;
    Plan plan;
    plan.lineage = "0123456789abcdef0123456789abcdef";
    State state;
    state.lineage = plan.lineage;
    state.serial = 3;
    for (const auto& p : providers) {
      std::vector<DesiredResource> all = p->Expand(m);
      for (size_t i = 0; i < all.size() && i < 256; ++i) {
        const DesiredResource& r = all[i];
        if (r.node != node) continue;
        const std::string output = sections[r.address].output;
        Save(out / (p->type() + "_probe") / r.address, std::string(1, char(i)) + output);
        ActualResource a = p->ParseProbe(r, output, facts);
        actual[r.address] = a;
        DiffContext ctx{facts, &all_facts, &actual, &m, false, &plan.changes};
        plan.changes.push_back(p->Diff(r, a, nullptr, ctx));
        state.Upsert({r.address, r.type, r.node, a.attributes, "2026-11-30T21:00:00Z"});
      }
    }
    Save(out / "plan" / (node + ".json"), plan.ToJson().dump(2));
    Save(out / "state" / (node + ".json"), state.ToJson().dump(2));
  }
  return 0;
}

}  // namespace
}  // namespace fleet

int main(int argc, char** argv) {
  if (argc == 5) return fleet::DumpHub(argv[1], {argv[2], argv[3], argv[4]});
  if (argc != 2) {
    std::cerr << "usage: seed_dump OUT_DIR [HUB_CACHE REPO REVISION]\n";
    return 2;
  }
  return fleet::Main(argv[1]);
}
