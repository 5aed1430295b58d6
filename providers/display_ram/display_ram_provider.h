// DisplayRamProvider (`display_ram.<node>`): the nvidia_drm module options
// that decide whether the display pool's memory goes to the serving engine.
//
// "unlocked" = modeset=1 fbdev=0, set by reloading the module (temporary, per
// boot: no modprobe.d, no initramfs). The values found before an unlock are
// recorded in state before the module is touched, and restored on destroy,
// when nothing needs the unlock any more, and on rollback. Serving
// containers (label fleet.deployment) running at plan time are stopped
// right before the reload and started again after it, whatever its outcome;
// their deployments then wait for their health.
#ifndef FLEET_PROVIDERS_DISPLAY_RAM_DISPLAY_RAM_PROVIDER_H_
#define FLEET_PROVIDERS_DISPLAY_RAM_DISPLAY_RAM_PROVIDER_H_

#include "providers/shared/display_ram_json.h"
#include "src/provider.h"

namespace fleet {

class DisplayRamProvider : public Provider {
 public:
  std::string type() const override { return "display_ram"; }
  std::vector<DesiredResource> Expand(const Manifest& m) const override;
  std::string ProbeScript(const DesiredResource& r, const NodeSpec& node) const override;
  ActualResource ParseProbe(const DesiredResource& r, const std::string& output,
                            const NodeFacts& facts) const override;
  PlanChange Diff(const DesiredResource& desired, const ActualResource& actual,
                  const ResourceRecord* record, const DiffContext& ctx) const override;
  PlanChange DiffDestroy(const DesiredResource& desired, const ActualResource& actual,
                         const ResourceRecord* record, const DiffContext& ctx) const override;
  Result<nlohmann::json> Apply(const PlanChange& change, const StepContext& ctx) const override;
  Status Undo(const PlanChange& change, const nlohmann::json& applied, const StepContext& ctx,
              bool* undone) const override;

 private:
  // Apply without starting serving containers after it; the step's
  // stop_containers go to the reload, which stops them right before it.
  Result<nlohmann::json> ApplyModule(const DisplayRamStep& step, const StepContext& ctx) const;
  // The module's change alone, before serving containers are considered.
  PlanChange DiffModule(const DesiredResource& desired, const ActualResource& actual,
                        const ResourceRecord* record, const DiffContext& ctx) const;
  // Diff, and whether its error is that something holds the DRM device
  // open (which a power off right after the restore makes moot).
  PlanChange DiffTellingHeld(const DesiredResource& desired, const ActualResource& actual,
                             const ResourceRecord* record, const DiffContext& ctx,
                             bool* held_open) const;
};

}  // namespace fleet

#endif  // FLEET_PROVIDERS_DISPLAY_RAM_DISPLAY_RAM_PROVIDER_H_
