#include "providers/shared/serving/fabric_values.h"

namespace fleet {

const std::vector<std::string>& FabricPlaceholderNames() {
  static const std::vector<std::string> names = {"fabric_addr", "fabric_if", "fabric_hca",
                                                 "fabric_gid_index", "head_fabric_addr"};
  return names;
}

std::map<std::string, std::string> FabricPlaceholders(const FabricValues& v) {
  std::map<std::string, std::string> out;
  if (!v.address.empty()) out.emplace("fabric_addr", v.address);
  if (!v.interface.empty()) out.emplace("fabric_if", v.interface);
  if (!v.hcas.empty()) out.emplace("fabric_hca", v.hcas);
  if (v.gid_index >= 0) out.emplace("fabric_gid_index", std::to_string(v.gid_index));
  if (!v.head_address.empty()) out.emplace("head_fabric_addr", v.head_address);
  return out;
}

std::map<std::string, std::string> FabricEnv(const FabricValues& v) {
  std::map<std::string, std::string> env;
  if (!v.interface.empty()) {
    env.emplace("NCCL_SOCKET_IFNAME", v.interface);
    env.emplace("GLOO_SOCKET_IFNAME", v.interface);
    env.emplace("UCX_NET_DEVICES", v.interface);
  }
  if (!v.hcas.empty()) env.emplace("NCCL_IB_HCA", v.hcas);
  if (v.gid_index >= 0) env.emplace("NCCL_IB_GID_INDEX", std::to_string(v.gid_index));
  if (!v.head_address.empty()) {
    env.emplace("MASTER_ADDR", v.head_address);
    env.emplace("MASTER_PORT", std::to_string(kTorchRendezvousPort));
  }
  return env;
}

std::string DescribeFabricValues(const FabricValues& v) {
  std::string s = v.address;
  if (!v.interface.empty()) s += " on " + v.interface;
  std::string ports;
  if (!v.hcas.empty()) ports = "HCA " + v.hcas;
  if (v.gid_index >= 0)
    ports += (ports.empty() ? "" : ", ") + std::string("GID ") + std::to_string(v.gid_index);
  if (!ports.empty()) s += " (" + ports + ")";
  if (!v.head_address.empty()) s += ", head " + v.head_address;
  return s;
}

}  // namespace fleet
