// fleet endpoints: where clients reach the serves the state records, and
// the model names they serve, ready to paste into a client's config (no
// hand-written node addresses: the log's agent had a provider named "dgx5"
// pointing at dgx3). Read from the state and the manifests only; nothing
// is probed. With a gateway (gateways:), its URL is the endpoint of every
// model it routes; only serves no gateway routes are listed by node.
#include <iostream>
#include <set>

#include "providers/gateway/gateway_config.h"
#include "providers/shared/serving/deployment_json.h"
#include "providers/shared/serving/smoke_check.h"
#include "src/engine/serve_commands.h"
#include "src/provider.h"
#include "state/state_store.h"

namespace fleet {
namespace {

struct Endpoint {
  std::string deployment, node, base_url, model;  // model "" when the recipe does not say
};

// Each model every recorded gateway routes, at the gateway's URL; adds the
// deployments behind them to `routed`.
std::vector<Endpoint> GatewayEndpoints(const Manifest& m, const State& state,
                                       std::set<std::string>* routed) {
  std::vector<Endpoint> out;
  for (const ResourceRecord& rec : state.resources) {
    auto node = m.nodes.find(rec.node);
    if (RoleOf(rec.type) != Role::kGateway || node == m.nodes.end()) continue;
    const GatewayWant w = rec.attributes.get<GatewayWant>();
    const std::string url =
        "http://" + ClientAddress(node->second) + ":" + std::to_string(w.port) + "/v1";
    std::set<std::string> models;
    for (const GatewayRoute& r : w.routes) {
      routed->insert(r.deployment);
      if (models.insert(r.model).second)
        out.push_back({"gateway " + w.gateway, rec.node, url, r.model});
    }
  }
  return out;
}

// The gateways' models, then the head of every recorded serve no gateway
// routes that answers the API (a worker has no health URL), with the client
// address the manifests give its node.
std::vector<Endpoint> Endpoints(const Manifest& m, const State& state) {
  std::set<std::string> routed;
  std::vector<Endpoint> out = GatewayEndpoints(m, state, &routed);
  for (const ResourceRecord& rec : state.resources) {
    if (RoleOf(rec.type) != Role::kServe || routed.count(ResourceName(rec.type, rec.address)))
      continue;
    const DeploymentRecord r = rec.attributes.get<DeploymentRecord>();
    auto node = m.nodes.find(rec.node);
    if (r.want.shown.health.empty() || node == m.nodes.end()) continue;
    ContainerSpec spec;  // what ExpectedServedModel reads: its command
    spec.deployment = ResourceName("deployment", rec.address);
    spec.command = r.want.shown.command;
    out.push_back(
        {spec.deployment, rec.node,
         "http://" + ClientAddress(node->second) + ":" + std::to_string(r.want.shown.port) + "/v1",
         ExpectedServedModel(m, spec)});
  }
  return out;
}

void PrintTable(const std::vector<Endpoint>& eps) {
  std::cout << "DEPLOYMENT           NODE       MODEL                     BASE URL\n";
  for (const Endpoint& e : eps) {
    std::string line = e.deployment;
    line.resize(std::max<size_t>(21, line.size() + 1), ' ');
    line += e.node;
    line.resize(std::max<size_t>(32, line.size() + 1), ' ');
    line += e.model.empty() ? "(ask /v1/models)" : e.model;
    line.resize(std::max<size_t>(58, line.size() + 1), ' ');
    std::cout << line << e.base_url << "\n";
  }
}

// An OpenAI client's settings, one block per serve.
void PrintOpenAi(const std::vector<Endpoint>& eps) {
  for (const Endpoint& e : eps)
    std::cout << "# " << e.deployment << " on " << e.node << "\nOPENAI_BASE_URL=" << e.base_url
              << "\nOPENAI_API_KEY=none\nOPENAI_MODEL=" << e.model << "\n\n";
}

// A LiteLLM proxy's model_list (config.yaml).
void PrintLiteLlm(const std::vector<Endpoint>& eps) {
  std::cout << "model_list:\n";
  for (const Endpoint& e : eps) {
    const std::string name = e.model.empty() ? e.deployment : e.model;
    std::cout << "  - model_name: " << nlohmann::json(name).dump() << "\n"
              << "    litellm_params:\n"
              << "      model: " << nlohmann::json("openai/" + name).dump() << "\n"
              << "      api_base: " << nlohmann::json(e.base_url).dump() << "\n"
              << "      api_key: \"none\"\n";
  }
}

}  // namespace

int CmdEndpoints(const GlobalOptions& g, const std::string& format) {
  SetUpLogging(g);
  Manifest m;
  if (!LoadManifestSaying(g, &m)) return 1;
  Result<State> state = OpenStateStore(m.state)->Load();
  if (!state.ok()) {
    std::cerr << "fleet: " << state.status().message() << "\n";
    return 1;
  }
  const std::vector<Endpoint> eps = Endpoints(m, *state);
  if (format == "json") {
    nlohmann::json j = nlohmann::json::array();
    for (const Endpoint& e : eps)
      j.push_back({{"deployment", e.deployment},
                   {"node", e.node},
                   {"base_url", e.base_url},
                   {"model", e.model}});
    std::cout << j.dump(2) << "\n";
  } else if (format == "openai") {
    PrintOpenAi(eps);
  } else if (format == "litellm") {
    PrintLiteLlm(eps);
  } else {
    PrintTable(eps);
  }
  return 0;
}

}  // namespace fleet
