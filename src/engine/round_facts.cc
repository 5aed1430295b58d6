#include "src/engine/round_facts.h"

#include "providers/node/node_json.h"
#include "providers/shared/display_ram_json.h"
#include "providers/shared/gpu_facts.h"
#include "providers/shared/serving/deployment_json.h"
#include "providers/shared/serving/deployment_probe.h"

namespace fleet {
namespace {

nlohmann::json Gpus(const NodeFacts& facts) {
  nlohmann::json out = nlohmann::json::array();
  GpuFacts gpu;
  if (!GpuFactsFromJson(facts.gpu, &gpu)) return out;
  for (const GpuInfo& g : gpu.gpus) {
    nlohmann::json j = {{"index", g.index}};
    if (g.memory_free_bytes) j["memory_free_bytes"] = *g.memory_free_bytes;
    if (g.memory_total_bytes) j["memory_total_bytes"] = *g.memory_total_bytes;
    out.push_back(std::move(j));
  }
  return out;
}

bool RecordedOn(const State& state, const std::string& node) {
  const ResourceRecord* rec = state.Find("node." + node);
  if (rec == nullptr) return true;
  const NodeRecord r = rec->attributes.get<NodeRecord>();
  return r.power.value_or(kPowerOn) == kPowerOn;
}

nlohmann::json DisplayUnlocked(const ProbeResult& probed, const std::string& node) {
  auto a = probed.actual.find("display_ram." + node);
  if (a == probed.actual.end() || !a->second.probed || !a->second.error.empty()) return nullptr;
  return a->second.attributes.get<DisplayRamFound>().mode == kModeUnlocked;
}

bool Quarantined(const State& state, const std::string& address) {
  const ResourceRecord* rec = state.Find(address);
  if (rec == nullptr) return false;
  const DeploymentRecord r = rec->attributes.get<DeploymentRecord>();
  return r.heal && r.heal->quarantined;
}

}  // namespace

nlohmann::json NodesOfRound(const ProbeResult& probed, const State& state) {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& [node, facts] : probed.facts)
    out[node] = {{"up", facts.reachable},
                 {"power_on", facts.reachable || RecordedOn(state, node)},
                 {"display_ram_unlocked", DisplayUnlocked(probed, node)},
                 {"gpus", Gpus(facts)}};
  return out;
}

nlohmann::json ServesOfRound(const ProbeResult& probed, const State& state) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& [address, actual] : probed.actual) {
    const std::string name = ResourceName("deployment", address);
    if (name.empty()) continue;
    bool up = false, busy = false;
    if (actual.probed && actual.error.empty()) {
      const ContainerProbe p = actual.attributes.get<ContainerProbe>();
      const bool answers = p.health == -1 || (p.health >= 200 && p.health < 300);
      up = p.exists && p.state == "running" && answers;
      // Its health probe timed out while it runs: busy (a long prefill),
      // said apart from down; heal_policy.h decides how long that may last.
      busy = p.exists && p.state == "running" && p.health_timed_out;
    }
    nlohmann::json serve = {{"deployment", name},
                            {"node", address.substr(address.rfind('@') + 1)},
                            {"up", up},
                            {"quarantined", Quarantined(state, address)}};
    if (busy) serve["busy"] = true;
    out.push_back(std::move(serve));
  }
  return out;
}

}  // namespace fleet
