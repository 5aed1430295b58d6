#include "src/resource.h"

namespace fleet {

std::string NodeAddress(const std::string& node) { return "node." + node; }

std::string ResourceAddress(const std::string& type, const std::string& name,
                            const std::string& node) {
  if (node.empty()) return type + "." + name;
  return type + "." + name + "@" + node;
}

std::string ResourceName(const std::string& type, const std::string& address) {
  const std::string prefix = type + ".";
  const size_t at = address.rfind('@');
  if (address.rfind(prefix, 0) != 0 || at == std::string::npos || at < prefix.size()) return "";
  return address.substr(prefix.size(), at - prefix.size());
}

nlohmann::json NodeFacts::ToJson() const {
  nlohmann::json j = {{"reachable", reachable}};
  if (!power_switch_state.empty()) j["power_switch"] = power_switch_state;
  if (!power_switch_error.empty()) j["power_switch_error"] = power_switch_error;
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
