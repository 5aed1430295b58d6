#include "providers/shared/fabric_facts.h"

#include <arpa/inet.h>

#include <algorithm>
#include <sstream>

#include "providers/shared/fabric_facts_sh.h"
#include "providers/shared/node_script.h"
#include "src/json_number.h"
#include "src/shell_quote.h"

namespace fleet {

namespace {

std::vector<std::string> Split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string field;
  std::istringstream in(s);
  while (std::getline(in, field, sep)) out.push_back(field);
  if (!s.empty() && s.back() == sep) out.emplace_back();
  return out;
}

int ToInt(const std::string& s, int fallback) {
  if (s.empty()) return fallback;
  size_t i = s[0] == '-' ? 1 : 0;
  if (i == s.size()) return fallback;
  for (size_t k = i; k < s.size(); ++k)
    if (s[k] < '0' || s[k] > '9' || k - i > 6) return fallback;
  return std::stoi(s);
}

bool ParseIpv4(const std::string& s, uint32_t* out) {
  in_addr a{};
  if (inet_pton(AF_INET, s.c_str(), &a) != 1) return false;
  *out = ntohl(a.s_addr);
  return true;
}

uint32_t Mask(int prefix_len) {
  return prefix_len <= 0 ? 0 : prefix_len >= 32 ? 0xffffffffu : ~((1u << (32 - prefix_len)) - 1);
}

std::string FormatIpv4(uint32_t v) {
  return std::to_string(v >> 24) + "." + std::to_string((v >> 16) & 255) + "." +
         std::to_string((v >> 8) & 255) + "." + std::to_string(v & 255);
}

}  // namespace

std::string FabricFactsScript(const std::string& sysfs) {
  // Inline, not `sh -c`: it runs in the node facts probe on every plan, and
  // a process more costs each node a few ms.
  return ScriptWithValues({{"fabric_sysfs", ShellQuote(sysfs)}}, kFabricFactsScript,
                          kFabricFactsScriptSize);
}

std::vector<FabricPort> ParseFabricPorts(const std::string& output) {
  std::vector<FabricPort> ports;
  std::istringstream in(output);
  std::string line;
  constexpr char kKey[] = "fabric_port=";
  while (std::getline(in, line)) {
    if (line.rfind(kKey, 0) != 0) continue;
    std::vector<std::string> f = Split(line.substr(sizeof kKey - 1), '|');
    if (f.size() != 7 || f[0].empty()) continue;
    FabricPort p;
    p.hca = f[0];
    p.port = ToInt(f[1], 0);
    p.state = f[2];
    p.netdev = f[3];
    p.rate_gbps = ToInt(f[4], 0);
    p.gid_index = ToInt(f[5], -1);
    const size_t slash = f[6].find('/');
    uint32_t ip = 0;
    if (slash != std::string::npos && ParseIpv4(f[6].substr(0, slash), &ip)) {
      p.ipv4 = f[6].substr(0, slash);
      p.prefix_len = std::clamp(ToInt(f[6].substr(slash + 1), 32), 0, 32);
    }
    ports.push_back(std::move(p));
  }
  return ports;
}

nlohmann::json FabricPortsToJson(const std::vector<FabricPort>& ports) {
  nlohmann::json a = nlohmann::json::array();
  for (const FabricPort& p : ports)
    a.push_back({{"hca", p.hca},
                 {"port", p.port},
                 {"state", p.state},
                 {"netdev", p.netdev},
                 {"rate_gbps", p.rate_gbps},
                 {"gid_index", p.gid_index},
                 {"ipv4", p.ipv4},
                 {"prefix_len", p.prefix_len}});
  return a;
}

std::vector<FabricPort> FabricPortsFromJson(const nlohmann::json& j) {
  std::vector<FabricPort> ports;
  if (!j.is_array()) return ports;
  for (const auto& e : j) {
    if (!e.is_object()) continue;
    FabricPort p;
    p.hca = e.value("hca", "");
    p.port = IntegerOr(e, "port", 0);
    p.state = e.value("state", "");
    p.netdev = e.value("netdev", "");
    p.rate_gbps = IntegerOr(e, "rate_gbps", 0);
    p.gid_index = IntegerOr(e, "gid_index", -1);
    p.ipv4 = e.value("ipv4", "");
    p.prefix_len = IntegerOr(e, "prefix_len", 0);
    ports.push_back(std::move(p));
  }
  return ports;
}

std::string FabricEndpoint::Subnet() const {
  uint32_t ip = 0;
  if (address.empty() || prefix_len <= 0 || !ParseIpv4(address, &ip)) return "";
  return FormatIpv4(ip & Mask(prefix_len)) + "/" + std::to_string(prefix_len);
}

FabricEndpoint ResolveFabric(const std::string& declared_address,
                             const std::string& declared_interface,
                             const std::vector<FabricPort>& ports) {
  FabricEndpoint e;
  std::vector<const FabricPort*> usable;
  for (const FabricPort& p : ports)
    if (p.usable()) usable.push_back(&p);
  std::stable_sort(usable.begin(), usable.end(), [](const FabricPort* a, const FabricPort* b) {
    return a->rate_gbps > b->rate_gbps;
  });
  const FabricPort* chosen = nullptr;
  if (!declared_address.empty()) {
    e.source = "manifest";
    e.address = declared_address;
    e.interface = declared_interface;
    for (const FabricPort* p : usable)
      if (p->ipv4 == declared_address ||
          (!declared_interface.empty() && p->netdev == declared_interface))
        chosen = chosen ? chosen : p;
    if (chosen != nullptr && chosen->ipv4 != declared_address)
      e.note = "declared " + declared_address + ", but " + chosen->netdev + " has " + chosen->ipv4;
  } else if (!usable.empty()) {
    e.source = "probe";
    chosen = usable.front();
    e.address = chosen->ipv4;
  } else {
    e.source = "none";
    e.note = ports.empty() ? "no infiniband/RoCE ports" : "no ACTIVE port with an IPv4 address";
    return e;
  }
  if (chosen != nullptr) {
    if (e.interface.empty()) e.interface = chosen->netdev;
    e.prefix_len = chosen->prefix_len;
    e.gid_index = chosen->gid_index;
    e.rate_gbps = chosen->rate_gbps;
  }
  for (const FabricPort* p : usable)
    if (std::find(e.hcas.begin(), e.hcas.end(), p->hca) == e.hcas.end() &&
        (chosen == nullptr || p->netdev == chosen->netdev || p->rate_gbps == chosen->rate_gbps))
      e.hcas.push_back(p->hca);
  return e;
}

bool SameFabricSubnet(const FabricEndpoint& a, const FabricEndpoint& b) {
  uint32_t x = 0, y = 0;
  if (!ParseIpv4(a.address, &x) || !ParseIpv4(b.address, &y)) return false;
  int len = a.prefix_len > 0 ? a.prefix_len : b.prefix_len > 0 ? b.prefix_len : 24;
  if (a.prefix_len > 0 && b.prefix_len > 0) len = std::min(a.prefix_len, b.prefix_len);
  return (x & Mask(len)) == (y & Mask(len));
}

std::string DescribeFabricPort(const FabricPort& p) {
  std::string s =
      p.hca + " port " + std::to_string(p.port) + " " + (p.state.empty() ? "?" : p.state);
  if (p.rate_gbps > 0) s += " " + std::to_string(p.rate_gbps) + " Gb/s";
  s += " " + (p.netdev.empty() ? std::string("(no netdev)") : p.netdev);
  if (!p.ipv4.empty()) s += " " + p.ipv4 + "/" + std::to_string(p.prefix_len);
  if (p.gid_index >= 0) s += " RoCE v2 GID " + std::to_string(p.gid_index);
  return s;
}

}  // namespace fleet
