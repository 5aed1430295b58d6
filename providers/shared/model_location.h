// Where a declared model's hub cache is on a node: the model provider
// stages it there, a serve binds it from there.
#ifndef FLEET_PROVIDERS_SHARED_MODEL_LOCATION_H_
#define FLEET_PROVIDERS_SHARED_MODEL_LOCATION_H_

#include <string>

#include "manifests/manifest.h"
#include "providers/shared/hub_remote.h"
#include "src/status.h"

namespace fleet {

// Where model `model` lives as `node` sees it: the node's hf_cache for
// store: local, the store's path when the node mounts the store.
Result<HubLocation> ModelLocationOnNode(const Manifest& m, const std::string& model,
                                        const std::string& node);

}  // namespace fleet

#endif  // FLEET_PROVIDERS_SHARED_MODEL_LOCATION_H_
