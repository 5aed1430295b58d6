// Where a model copy is and which node reaches it: shared by Expand, Diff
// and Apply of ModelProvider.
#ifndef FLEET_PROVIDERS_MODEL_MODEL_SCOPE_H_
#define FLEET_PROVIDERS_MODEL_MODEL_SCOPE_H_

#include <string>
#include <vector>

#include "manifests/manifest.h"
#include "providers/model/model_attrs.h"

namespace fleet {

// A node the manifests declare `power: {state: off}`: nothing on it is
// probed or changed.
bool DeclaredOff(const Manifest& m, const std::string& node);

// The node a store's model goes through (probe and staging): the first
// node of the store's list that the manifests declare on. A node declared
// off cannot read the store, and the store does not depend on which node
// reads it. All declared off: the first (the plan then says it is off).
std::string StoreNode(const Manifest& m, const StoreSpec& s);

// "dgx5" for a node's cache, "store nas (through dgx1)" for a store, "store
// nas (through dgx2; dgx1 is declared off)" when the first is declared off.
std::string WhereOf(const ModelWant& w, const std::string& node);

// The first 12 characters of a commit id, as the plan prints it.
std::string ShortRevision(const std::string& rev);

// "a, b, c".
std::string CommaList(const std::vector<std::string>& v);

}  // namespace fleet

#endif  // FLEET_PROVIDERS_MODEL_MODEL_SCOPE_H_
