#include "src/engine/copy_chains.h"

#include <cstdlib>
#include <cstring>
#include <map>
#include <tuple>

#include "src/settings.h"

namespace fleet {

namespace {

bool Chainable(const PlanChange& c) {
  return c.copy && c.copy->direct && !c.copy->to_address.empty() && c.action != Action::kNoop &&
         c.error.empty();
}

}  // namespace

void ChainFanOuts(std::vector<PlanChange>* changes, bool enabled) {
  using Group = std::tuple<std::string, std::string, std::string>;  // what, from, fabric
  std::map<Group, std::vector<PlanChange*>> fan_outs;
  for (PlanChange& c : *changes) {
    if (c.copy) c.copy->chain.clear();
    if (enabled && Chainable(c))
      fan_outs[{c.copy->what, c.copy->from, c.copy->fabric}].push_back(&c);
  }
  for (auto& [group, members] : fan_outs) {
    if (members.size() < 2) continue;
    std::vector<CopyRoute::Hop> chain;
    for (const PlanChange* c : members) chain.push_back({c->copy->to, c->copy->to_address});
    for (PlanChange* c : members) c->copy->chain = chain;
  }
}

bool FanOutChainsEnabled() { return !ProcessSettings().fabric_chain_off(); }

}  // namespace fleet
