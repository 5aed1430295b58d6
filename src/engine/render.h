// Human-readable output: plans as a Terraform-like diff, states, reports.
#ifndef FLEET_SRC_ENGINE_RENDER_H_
#define FLEET_SRC_ENGINE_RENDER_H_

#include <string>

#include "src/engine/executor.h"
#include "src/plan.h"
#include "state/state.h"

namespace fleet {

struct RenderOptions {
  bool color = false;
};

std::string RenderPlan(const Plan& plan, const RenderOptions& options);
std::string RenderApplyReport(const ApplyReport& report, bool destroy,
                              const RenderOptions& options);
std::string RenderState(const State& state);

}  // namespace fleet

#endif  // FLEET_SRC_ENGINE_RENDER_H_
