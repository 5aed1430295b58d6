// ProbeProvider (`probe.<node>`): keeps fleet-probe, the node-side GPU facts
// program (src/probe/), installed at ~/.fleet/bin/fleet-probe on every node.
//
// Why a managed resource: on GB10 (unified memory) nvidia-smi and NVML say
// [N/A] for GPU memory, and only the CUDA driver answers; the probe asks it.
// A node of the controller's architecture gets the controller's build
// (uploaded); another architecture compiles the embedded single source with
// the node's own compiler. Installed versions are told apart by the sha256 of
// that source, written beside the binary.
#ifndef FLEET_PROVIDERS_PROBE_PROBE_PROVIDER_H_
#define FLEET_PROVIDERS_PROBE_PROBE_PROVIDER_H_

#include "src/provider.h"

namespace fleet {

class ProbeProvider : public Provider {
 public:
  std::string type() const override { return "probe"; }
  std::vector<DesiredResource> Expand(const Manifest& m) const override;
  std::string ProbeScript(const DesiredResource& r, const NodeSpec& node) const override;
  ActualResource ParseProbe(const DesiredResource& r, const std::string& output,
                            const NodeFacts& facts) const override;
  PlanChange Diff(const DesiredResource& desired, const ActualResource& actual,
                  const ResourceRecord* record, const DiffContext& ctx) const override;
  Result<nlohmann::json> Apply(const PlanChange& change, const StepContext& ctx) const override;
};

// The controller's fleet-probe build: next to the running fleet binary, or in
// the build tree (src/probe/ beside src/engine/). "" when there is none.
std::string LocalProbeBinary();

}  // namespace fleet

#endif  // FLEET_PROVIDERS_PROBE_PROBE_PROVIDER_H_
