// The labels fleet puts on every serving container it starts. The
// deployment provider writes them; the node's engine listing and the
// display_ram provider's serve listing read them back: shared here, so that
// no provider includes another's header for them.
#ifndef FLEET_PROVIDERS_SHARED_CONTAINER_LABELS_H_
#define FLEET_PROVIDERS_SHARED_CONTAINER_LABELS_H_

namespace fleet {

inline constexpr const char* kDeploymentLabel = "fleet.deployment";
inline constexpr const char* kSpecLabel = "fleet.spec";

}  // namespace fleet

#endif  // FLEET_PROVIDERS_SHARED_CONTAINER_LABELS_H_
