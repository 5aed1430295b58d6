// Fabric facts: a node's RoCE/InfiniBand ports and the address other nodes
// reach it at over the fabric (the 200 Gb/s ConnectX-7 link between DGX
// Sparks), read in the node's probe round trip, or declared in fleet.yaml
// (`fabric: {address, interface}`).
//
// The probe walks <sysfs>/class/infiniband/*/ports/* and prints one line per
// port: HCA, port, state, netdev, rate, the RoCE v2 GID index of the
// netdev's IPv4 (the GID ::ffff:a.b.c.d), and the netdev's IPv4/prefix
// (`ip -4 -o addr`). An ACTIVE port with an IPv4 is usable.
#ifndef FLEET_PROVIDERS_SHARED_FABRIC_FACTS_H_
#define FLEET_PROVIDERS_SHARED_FABRIC_FACTS_H_

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace fleet {

struct NodeSpec;

struct FabricPort {
  std::string hca;     // rocep1s0f1
  int port = 0;        // 1
  std::string state;   // "ACTIVE", "DOWN", ... (sysfs "4: ACTIVE" without the number)
  std::string netdev;  // enp1s0f1np1 ("" when none is bound)
  int rate_gbps = 0;   // 200 ("200 Gb/sec (4X HDR)")
  int gid_index = -1;  // RoCE v2 GID of the netdev's IPv4; -1: none
  std::string ipv4;    // 10.77.0.11 ("" when the netdev has none)
  int prefix_len = 0;  // 24

  bool active() const { return state == "ACTIVE"; }
  bool usable() const { return active() && !ipv4.empty(); }
};

// What a node offers on the fabric: the endpoint other nodes connect to,
// and the ports for NCCL/UCX.
struct FabricEndpoint {
  std::string address;            // "" when the node has no usable fabric
  std::string interface;          // the netdev
  int prefix_len = 0;             // 0 when declared without a probed port
  std::vector<std::string> hcas;  // active HCAs, "rocep1s0f1" (NCCL_IB_HCA)
  int gid_index = -1;
  int rate_gbps = 0;
  std::string source;  // "manifest", "probe" or "none"
  std::string note;    // why there is none, or what the declaration disagrees with

  bool usable() const { return !address.empty(); }
  // "10.77.0.0/24" (the network of address/prefix), "" when unknown.
  std::string Subnet() const;
};

// The shell fragment that prints `fabric_port=...` lines (one per port) for
// the infiniband tree under `sysfs` (paths.sysfs; "/sys" on a real node):
// the embedded fabric_facts.sh after its one assignment, for the node facts
// probe's own shell.
std::string FabricFactsScript(const std::string& sysfs);

// Parses the `fabric_port=` lines of a probe's output (other lines ignored).
std::vector<FabricPort> ParseFabricPorts(const std::string& output);

nlohmann::json FabricPortsToJson(const std::vector<FabricPort>& ports);
std::vector<FabricPort> FabricPortsFromJson(const nlohmann::json& j);

// The node's endpoint: the manifest's `fabric:` when declared (checked
// against the probed ports for its interface and HCA), else the first
// usable probed port (the fastest, then by name).
FabricEndpoint ResolveFabric(const std::string& declared_address,
                             const std::string& declared_interface,
                             const std::vector<FabricPort>& ports);

// Whether `a` and `b` are in one subnet (the prefix of either; when both
// are unknown, the /24 of each).
bool SameFabricSubnet(const FabricEndpoint& a, const FabricEndpoint& b);

// "rocep1s0f1 port 1 ACTIVE 200 Gb/s enp1s0f1np1 10.77.0.11/24 GID 3" per port.
std::string DescribeFabricPort(const FabricPort& p);

}  // namespace fleet

#endif  // FLEET_PROVIDERS_SHARED_FABRIC_FACTS_H_
