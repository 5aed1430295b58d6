#include "src/provider.h"

namespace fleet {

PlanChange Provider::DiffDestroy(const DesiredResource& desired, const ActualResource& actual,
                                 const ResourceRecord* /*record*/,
                                 const DiffContext& /*ctx*/) const {
  PlanChange c;
  c.address = desired.address;
  c.type = desired.type;
  c.node = desired.node;
  c.action = Action::kNoop;
  c.summary = "kept (destroy leaves " + desired.type + " resources in place)";
  c.before = actual.exists ? actual.attributes : nlohmann::json();
  c.after = c.before;
  return c;
}

Status Provider::Undo(const PlanChange& change, const nlohmann::json& /*applied*/,
                      const StepContext& /*ctx*/, bool* undone) const {
  (void)change;
  *undone = false;
  return Status::OK();
}

}  // namespace fleet
