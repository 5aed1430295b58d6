#include "providers/shared/model_location.h"

#include <algorithm>

namespace fleet {

Result<HubLocation> ModelLocationOnNode(const Manifest& m, const std::string& model,
                                        const std::string& node) {
  using R = Result<HubLocation>;
  auto it = m.models.find(model);
  if (it == m.models.end()) return R::Error("no model '" + model + "' in the manifests");
  auto n = m.nodes.find(node);
  if (n == m.nodes.end()) return R::Error("no node '" + node + "' in the manifests");
  const ModelSpec& spec = it->second;
  if (spec.store == "local" || spec.store.empty())
    return HubLocation{n->second.hf_cache, spec.repo, spec.revision};
  auto s = m.stores.find(spec.store);
  if (s == m.stores.end()) return R::Error("model '" + model + "': no store '" + spec.store + "'");
  if (std::find(s->second.nodes.begin(), s->second.nodes.end(), node) == s->second.nodes.end())
    return R::Error("model '" + model + "' lives in store " + spec.store + ", which node " + node +
                    " does not mount (its nodes: " +
                    [&] {
                      std::string l;
                      for (const std::string& x : s->second.nodes) l += (l.empty() ? "" : ", ") + x;
                      return l;
                    }() +
                    ")");
  return HubLocation{s->second.path, spec.repo, spec.revision};
}

}  // namespace fleet
