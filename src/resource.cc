#include "src/resource.h"

namespace fleet {

std::string NodeAddress(const std::string& node) { return "node." + node; }

std::string ResourceAddress(const std::string& type, const std::string& name,
                            const std::string& node) {
  if (node.empty()) return type + "." + name;
  return type + "." + name + "@" + node;
}

nlohmann::json NodeFacts::ToJson() const {
  nlohmann::json j = {{"reachable", reachable}};
  if (!reachable) {
    j["unreachable_reason"] = unreachable_reason;
    return j;
  }
  j["hostname"] = hostname;
  j["machine_id"] = machine_id;
  j["boot_id"] = boot_id;
  j["arch"] = arch;
  j["kernel"] = kernel;
  j["gpu"] = gpu;
  j["fabric"] = fabric;
  if (fleet_serves_listed) j["fleet_serves"] = fleet_serves;
  return j;
}

}  // namespace fleet
