#include "src/engine/removal_order.h"

#include <algorithm>

namespace fleet {

void OrderUndeclaredRemovals(const std::map<std::string, std::vector<std::string>>& declared,
                             const std::vector<std::string>& type_order,
                             std::vector<PlanChange>* changes) {
  auto rank = [&](const std::string& type) {
    return std::find(type_order.begin(), type_order.end(), type) - type_order.begin();
  };
  auto undeclared_delete = [&](const PlanChange& c) {
    return c.action == Action::kDelete && !declared.count(c.address);
  };
  for (PlanChange& c : *changes) {
    if (!undeclared_delete(c)) continue;
    for (const PlanChange& later : *changes) {
      if (&later == &c || !undeclared_delete(later) || later.node != c.node) continue;
      if (rank(later.type) <= rank(c.type)) continue;
      if (std::find(c.depends_on.begin(), c.depends_on.end(), later.address) == c.depends_on.end())
        c.depends_on.push_back(later.address);
    }
  }
}

}  // namespace fleet
