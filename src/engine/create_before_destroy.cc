#include "src/engine/create_before_destroy.h"

#include <algorithm>
#include <map>
#include <set>
#include <string>

namespace fleet {
namespace {

// Whether `from` waits, directly or through others, for `target`.
bool WaitsFor(const std::map<std::string, PlanChange*>& by_address, const std::string& from,
              const std::string& target) {
  std::set<std::string> seen;
  std::vector<std::string> todo = {from};
  while (!todo.empty()) {
    const std::string a = todo.back();
    todo.pop_back();
    if (a == target) return true;
    if (!seen.insert(a).second) continue;
    auto it = by_address.find(a);
    if (it == by_address.end()) continue;
    for (const std::string& d : it->second->depends_on) todo.push_back(d);
  }
  return false;
}

}  // namespace

void OrderCreateBeforeDestroy(std::vector<PlanChange>* changes) {
  std::map<std::string, PlanChange*> by_address;
  for (PlanChange& c : *changes) by_address[c.address] = &c;
  for (PlanChange& c : *changes) {
    if (c.action == Action::kNoop) continue;
    for (const PlanChange::RemovalAfter& r : c.before_removals) {
      auto it = by_address.find(r.address);
      if (it == by_address.end() || it->second->action != Action::kDelete) continue;
      PlanChange& removal = *it->second;
      if (WaitsFor(by_address, c.address, removal.address)) {
        if (std::find(c.reasons.begin(), c.reasons.end(), r.if_not) == c.reasons.end())
          c.reasons.push_back(r.if_not);
        continue;
      }
      if (std::find(removal.depends_on.begin(), removal.depends_on.end(), c.address) ==
          removal.depends_on.end()) {
        removal.depends_on.push_back(c.address);
        removal.reasons.push_back("after " + c.address + " (create before destroy)");
      }
    }
  }
}

}  // namespace fleet
