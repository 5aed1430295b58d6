// The list of resource types fleet knows, in the order their types depend on
// each other (a node before what lives on it).
#include "providers/deployment/deployment_provider.h"
#include "providers/display_ram/display_ram_provider.h"
#include "providers/gateway/gateway_provider.h"
#include "providers/image/image_provider.h"
#include "providers/model/model_provider.h"
#include "providers/node/node_provider.h"
#include "providers/probe/probe_provider.h"

namespace fleet {

std::vector<std::unique_ptr<Provider>> MakeProviders() {
  std::vector<std::unique_ptr<Provider>> p;
  p.push_back(std::make_unique<NodeProvider>());
  p.push_back(std::make_unique<ProbeProvider>());
  p.push_back(std::make_unique<DisplayRamProvider>());
  p.push_back(std::make_unique<ImageProvider>());
  p.push_back(std::make_unique<ModelProvider>());
  p.push_back(std::make_unique<DeploymentProvider>());
  p.push_back(std::make_unique<GatewayProvider>());
  return p;
}

Role RoleOf(const std::string& type) {
  // The providers hold no state: one set, made once, answers every call.
  static const std::vector<std::unique_ptr<Provider>> providers = MakeProviders();
  for (const std::unique_ptr<Provider>& p : providers)
    if (p->type() == type) return p->role();
  return Role::kOther;
}

}  // namespace fleet
