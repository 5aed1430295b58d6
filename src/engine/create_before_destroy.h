// Create before destroy: a change that must come before some removals
// (PlanChange::before_removals, e.g. a gateway's reload away from a moved
// serve) makes those removals wait for it, as Terraform's
// create_before_destroy does, so that the old serve stops only once
// clients are sent to the new one. If the new serve fails, the reload
// never runs and neither does the removal: the old serve keeps serving.
#ifndef FLEET_SRC_ENGINE_CREATE_BEFORE_DESTROY_H_
#define FLEET_SRC_ENGINE_CREATE_BEFORE_DESTROY_H_

#include <vector>

#include "src/plan.h"

namespace fleet {

// For each change C and each of C.before_removals naming a delete D of this
// plan: D waits for C, unless C already (transitively) waits for D (the new
// serve needs the old one's place: stop first), in which case C gets the
// removal's `if_not` as a reason. Never makes a cycle.
void OrderCreateBeforeDestroy(std::vector<PlanChange>* changes);

}  // namespace fleet

#endif  // FLEET_SRC_ENGINE_CREATE_BEFORE_DESTROY_H_
