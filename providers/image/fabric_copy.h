// An image copy over the fabric: `<cli> save <config>` on the source node
// streamed straight into `<cli> load` on the target node (FabricStream), no
// byte through the controller; then the same check and cleanup as a copy
// through the controller (FinishImageCopy: the target must hold the config
// digest, or whatever the load left is removed).
#ifndef FLEET_PROVIDERS_IMAGE_FABRIC_COPY_H_
#define FLEET_PROVIDERS_IMAGE_FABRIC_COPY_H_

#include "manifests/manifest.h"
#include "providers/image/image_steps.h"
#include "providers/shared/fabric_route.h"
#include "src/settings.h"

namespace fleet {

// `spec.source` is only used for the checks before; the stream gets a
// transport of its own to the source node (copies from one source to
// several targets then run at once). `route` must be direct.
// *unconnected is set (with the error) when no connection could be made
// over the fabric and no byte was sent: the caller may copy another way.
Status CopyImageOverFabric(const CopySpec& spec, const FabricRoute& route, const Manifest& m,
                           const Settings& settings, const ProgressFn& progress, bool* unconnected);

}  // namespace fleet

#endif  // FLEET_PROVIDERS_IMAGE_FABRIC_COPY_H_
