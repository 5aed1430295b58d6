#include "providers/image/fabric_copy.h"

#include <cstdio>
#include <cstdlib>

#include "providers/shared/fabric_stream.h"
#include "src/provider.h"
#include "src/shell_quote.h"

namespace fleet {

Status CopyImageOverFabric(const CopySpec& spec, const FabricRoute& route, const Manifest& m,
                           const Settings& settings, const ProgressFn& progress,
                           bool* unconnected) {
  *unconnected = false;
  auto node = m.nodes.find(spec.source_node);
  if (node == m.nodes.end()) return Status::Error("no node " + spec.source_node);
  std::unique_ptr<Transport> source = MakeTransport(EndpointFor(node->second));
  Status s = source->Connect();
  if (!s.ok()) return s.Prefixed("source node " + spec.source_node);

  FabricStreamSpec stream;
  stream.source = source.get();
  stream.source_cmd = ShellCommand({spec.source_cli, "save", spec.config});
  stream.target = spec.target;
  stream.target_cmd = ShellCommand({spec.target_cli, "load"});
  stream.target_address = route.target_address;
  stream.clock = spec.clock;
  // Test hook (integration tests only): the source presents a wrong key.
  if (!settings.test_fabric_wrong_key.empty()) stream.source_key_override = std::string(64, 'f');
  if (progress)
    progress("copying " + ShortId(spec.config) + " " + route.Describe() + ": `" +
             stream.source_cmd + "` | TLS-PSK | `" + stream.target_cmd + "`");
  FabricStreamResult r = FabricStream(stream);
  if (r.unconnected) {
    *unconnected = true;
    return Status::Error(r.Problem());
  }
  std::vector<std::string> loaded;
  if (r.target.ok()) loaded = ParseLoadedNames(r.target->out + "\n" + r.target->err);
  char moved[96];
  snprintf(moved, sizeof moved, "%.1f s over the fabric", r.seconds);
  return FinishImageCopy(spec, r.Problem(), loaded, moved, progress);
}

}  // namespace fleet
