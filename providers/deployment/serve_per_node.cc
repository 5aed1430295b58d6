#include "providers/deployment/serve_per_node.h"

#include <algorithm>

#include "providers/shared/serving/deployment_spec.h"

namespace fleet {

std::vector<std::string> DisplacedServes(const Manifest* m, const std::string& node,
                                         const std::vector<std::string>& serving) {
  std::vector<std::string> out;
  if (m == nullptr) return out;
  const std::string prefix = ContainerName("");
  for (const std::string& name : serving) {
    if (name.rfind(prefix, 0) != 0) continue;
    auto d = m->deployments.find(name.substr(prefix.size()));
    if (d == m->deployments.end() ||
        std::find(d->second.nodes.begin(), d->second.nodes.end(), node) == d->second.nodes.end())
      out.push_back(name);
  }
  return out;
}

void WaitForDisplacedServes(const DesiredResource& desired, const DiffContext& ctx,
                            const std::vector<std::string>& serving, PlanChange* c) {
  // A change in error is never applied, so it waits for nothing.
  if (!c->error.empty()) return;
  const std::string prefix = ContainerName("");
  for (const std::string& name : DisplacedServes(ctx.manifest, desired.node, serving)) {
    const std::string address =
        ResourceAddress("deployment", name.substr(prefix.size()), desired.node);
    if (std::find(c->depends_on.begin(), c->depends_on.end(), address) != c->depends_on.end())
      continue;
    c->depends_on.push_back(address);
    c->reasons.push_back("one serve per node: " + name + " runs on " + desired.node +
                         ", which the manifests give to " + desired.name + " now; " + address +
                         " is stopped first");
  }
}

}  // namespace fleet
