#include "providers/deployment/deployment_fabric.h"

#include "manifests/recipe.h"
#include "providers/shared/fabric_route.h"

namespace fleet {
namespace {

// Why the deployment uses the fabric, for its errors: "fabric_env: true"
// or "{fabric_if}" (the first fabric placeholder its recipe uses).
std::string FabricUse(const DeploymentSpec& dep) {
  if (dep.fabric_env) return "fabric_env: true";
  for (const std::string& p : FabricPlaceholderNames())
    if (RecipeUsesPlaceholder(dep.recipe, p)) return "{" + p + "}";
  return "the fabric";
}

// Why `node` has no usable endpoint `e`.
std::string NoFabricWhy(const std::map<std::string, NodeFacts>* facts, const std::string& node,
                        const FabricEndpoint& e) {
  if (facts == nullptr) return "none declared, and not probed yet";
  auto f = facts->find(node);
  // Why it could not be probed is the plan's own line for the node.
  if (f == facts->end() || !f->second.reachable)
    return "none declared, and " + node + " could not be probed";
  return e.note.empty() ? "none declared or probed" : e.note;
}

std::string WithSubnet(const std::string& node, const FabricEndpoint& e) {
  const std::string subnet = e.Subnet();
  return node + " " + e.address + (subnet.empty() ? "" : " (" + subnet + ")");
}

// Every node's endpoint, or the error: a node without one, or nodes that
// share no subnet with the head.
Result<std::map<std::string, FabricEndpoint>> GroupEndpoints(
    const Manifest& m, const DeploymentSpec& dep, const std::string& what,
    const std::map<std::string, NodeFacts>* facts) {
  std::map<std::string, FabricEndpoint> out;
  for (const std::string& n : dep.nodes) {
    FabricEndpoint e = NodeFabricEndpoint(m, facts, n);
    if (!e.usable())
      return Status::Error(what + ", but " + n + " has no fabric address (" +
                           NoFabricWhy(facts, n, e) +
                           "); declare fabric: {address: ...} on it, or bring up its RoCE port");
    out[n] = std::move(e);
  }
  const std::string& head = dep.nodes.front();
  std::string apart;
  for (const std::string& n : dep.nodes)
    if (n != head && !SameFabricSubnet(out[head], out[n])) apart += ", " + WithSubnet(n, out[n]);
  if (!apart.empty())
    return Status::Error(what + ", but its nodes share no fabric subnet: " +
                         WithSubnet(head, out[head]) + " (the head)" + apart);
  return out;
}

// A placeholder the recipe uses, or the interface fabric_env needs, that
// has no value on `node`.
Status CheckKnown(const DeploymentSpec& dep, const std::string& what, const std::string& node,
                  const FabricValues& v) {
  const std::map<std::string, std::string> known = FabricPlaceholders(v);
  for (const std::string& p : FabricPlaceholderNames()) {
    const bool needed =
        RecipeUsesPlaceholder(dep.recipe, p) || (dep.fabric_env && p == "fabric_if");
    if (!needed || known.count(p)) continue;
    const std::string why = p == "fabric_if"    ? "its fabric interface is not known"
                            : p == "fabric_hca" ? "no active RoCE HCA was probed"
                                                : "no RoCE v2 GID index was probed";
    return Status::Error(what + ", but " + why + " on " + node +
                         " (declare fabric: {interface: ...}, or let the probe read "
                         "/sys/class/infiniband)" +
                         (p == "fabric_if" ? "" : " for {" + p + "}"));
  }
  return Status::OK();
}

std::string Join(const std::vector<std::string>& parts) {
  std::string s;
  for (const std::string& p : parts) s += (s.empty() ? "" : ",") + p;
  return s;
}

}  // namespace

bool UsesFabric(const DeploymentSpec& dep) {
  if (dep.fabric_env) return true;
  for (const std::string& p : FabricPlaceholderNames())
    if (RecipeUsesPlaceholder(dep.recipe, p)) return true;
  return false;
}

Result<FabricValues> DeploymentFabric(const Manifest& m, const std::string& name,
                                      const std::string& node,
                                      const std::map<std::string, NodeFacts>* facts) {
  auto d = m.deployments.find(name);
  if (d == m.deployments.end() || d->second.nodes.empty())
    return Status::Error("no deployment '" + name + "' with nodes in the manifests");
  const DeploymentSpec& dep = d->second;
  const std::string what = "deployment '" + name + "' uses the fabric (" + FabricUse(dep) + ")";
  Result<std::map<std::string, FabricEndpoint>> group = GroupEndpoints(m, dep, what, facts);
  if (!group.ok()) return group.status();
  auto self = group->find(node);
  if (self == group->end())
    return Status::Error("deployment '" + name + "' does not list node " + node);
  const FabricEndpoint& e = self->second;
  const FabricEndpoint& head = group->at(dep.nodes.front());
  FabricValues v;
  v.address = e.address;
  v.interface = e.interface;
  v.hcas = Join(e.hcas);
  v.gid_index = e.gid_index;
  v.head_address = head.address;
  v.subnet = !head.Subnet().empty() ? head.Subnet() : e.Subnet();
  Status known = CheckKnown(dep, what, node, v);
  if (!known.ok()) return known;
  return v;
}

Result<ContainerSpec> RenderWithFabric(const Manifest& m, const std::string& name,
                                       const std::string& node,
                                       const std::map<std::string, NodeFacts>* facts,
                                       const TensorRowCounts* rows) {
  auto d = m.deployments.find(name);
  if (d == m.deployments.end() || !UsesFabric(d->second))
    return RenderContainerSpec(m, name, node, nullptr, rows);
  Result<FabricValues> fabric = DeploymentFabric(m, name, node, facts);
  if (!fabric.ok()) return fabric.status();
  return RenderContainerSpec(m, name, node, &*fabric, rows);
}

}  // namespace fleet
