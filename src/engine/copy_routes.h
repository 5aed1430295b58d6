// The routes of a plan's copies between nodes, combined per source: what
// `fleet plan` (and its Markdown summary) shows below the changes, e.g.
//   image b12x: dgx4 → dgx1 → dgx2 → dgx3 over fabric 10.77.0.0/24 (one chain: ...)
//   image b12x: dgx4 → dgx1, dgx2 over fabric 10.77.0.0/24   (FLEET_FABRIC_CHAIN=off)
//   image b12x: dgx4 → dgx5 through the controller (no common fabric subnet)
// Fed by the typed CopyRoute each copying change carries (src/plan.h).
#ifndef FLEET_SRC_ENGINE_COPY_ROUTES_H_
#define FLEET_SRC_ENGINE_COPY_ROUTES_H_

#include <string>
#include <vector>

#include "src/plan.h"

namespace fleet {

// One line per thing copied from one source along one route (the fabric
// subnet, or the controller for one reason), its targets in the order of
// the plan's changes, the lines in the order of their first change.
// Changes with nothing to do or with an error are left out.
std::vector<std::string> CopyRouteLines(const Plan& plan);

}  // namespace fleet

#endif  // FLEET_SRC_ENGINE_COPY_ROUTES_H_
