#include "providers/model/model_scope.h"

namespace fleet {

bool DeclaredOff(const Manifest& m, const std::string& node) {
  auto it = m.nodes.find(node);
  return it != m.nodes.end() && it->second.power.present && it->second.power.state == "off";
}

std::string StoreNode(const Manifest& m, const StoreSpec& s) {
  std::string first;
  for (const std::string& n : s.nodes) {
    if (!m.nodes.count(n)) continue;
    if (first.empty()) first = n;
    if (!DeclaredOff(m, n)) return n;
  }
  return first;
}

std::string WhereOf(const ModelWant& w, const std::string& node) {
  if (!w.InStore()) return node;
  std::string off;
  for (const std::string& n : w.store_nodes_off)
    if (n != node) off += (off.empty() ? "" : ", ") + n;
  return "store " + w.location + " (through " + node +
         (off.empty() ? ""
                      : "; " + off + (off.find(',') == std::string::npos ? " is" : " are") +
                            " declared off") +
         ")";
}

std::string ShortRevision(const std::string& rev) { return rev.substr(0, 12); }

std::string CommaList(const std::vector<std::string>& v) {
  std::string s;
  for (const std::string& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

}  // namespace fleet
