// FabricValues: the fabric facts one container of a deployment gets, as
// typed values: its node's fabric address, netdev, active RoCE HCAs and
// RoCE v2 GID index, and the head's fabric address (see deployment_fabric.h
// for where they come from and when they are an error).
//
// They fill the recipe placeholders {fabric_addr}, {fabric_if},
// {fabric_hca}, {fabric_gid_index} and {head_fabric_addr}, and, with
// `fabric_env: true` on the deployment, the env the DGX Spark playbooks set
// by hand for NCCL, Gloo and UCX:
//   NCCL_SOCKET_IFNAME = GLOO_SOCKET_IFNAME = UCX_NET_DEVICES = {fabric_if}
//   NCCL_IB_HCA = {fabric_hca}          (comma-separated, as NCCL reads it)
//   NCCL_IB_GID_INDEX = {fabric_gid_index}
//   MASTER_ADDR = {head_fabric_addr}    (torch.distributed's rendezvous)
//   MASTER_PORT = 29500                 (torch's default: no manifest or
//                                        recipe field names the group's port)
#ifndef FLEET_PROVIDERS_SHARED_SERVING_FABRIC_VALUES_H_
#define FLEET_PROVIDERS_SHARED_SERVING_FABRIC_VALUES_H_

#include <map>
#include <string>
#include <vector>

namespace fleet {

struct FabricValues {
  std::string address;       // {fabric_addr}: 10.77.0.12
  std::string interface;     // {fabric_if}: enp1s0f1np1 ("" when not known)
  std::string hcas;          // {fabric_hca}: "rocep1s0f1" or "a,b" ("" when none probed)
  int gid_index = -1;        // {fabric_gid_index}; -1 when not known
  std::string head_address;  // {head_fabric_addr}: the head's (rank 0's) fabric address
  std::string subnet;        // the subnet the group shares, "10.77.0.0/24" ("" unknown)

  bool operator==(const FabricValues&) const = default;
};

// MASTER_PORT of `fabric_env: true`: torch.distributed's default rendezvous
// port (what torchrun and the DGX Spark playbooks use when none is given).
// A recipe that rendezvouses elsewhere sets MASTER_PORT in its own env.
inline constexpr int kTorchRendezvousPort = 29500;

// The fabric placeholder names a recipe may use, without braces.
const std::vector<std::string>& FabricPlaceholderNames();

// Placeholder name -> value; a value that is not known is absent.
std::map<std::string, std::string> FabricPlaceholders(const FabricValues& v);

// The env of `fabric_env: true`; a variable whose value is not known (no
// HCA or GID probed) is left out. MASTER_PORT comes with MASTER_ADDR.
std::map<std::string, std::string> FabricEnv(const FabricValues& v);

// "10.77.0.12 on enp1s0f1np1 (HCA rocep1s0f1, GID 3), head 10.77.0.11".
std::string DescribeFabricValues(const FabricValues& v);

}  // namespace fleet

#endif  // FLEET_PROVIDERS_SHARED_SERVING_FABRIC_VALUES_H_
