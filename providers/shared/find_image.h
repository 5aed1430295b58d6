// Whether a node holds an image, looked up by the container engine's
// `image inspect`: the image provider before it pulls or copies, a serve's
// start (the image must already be there: never a pull), a gateway's too.
#ifndef FLEET_PROVIDERS_SHARED_FIND_IMAGE_H_
#define FLEET_PROVIDERS_SHARED_FIND_IMAGE_H_

#include <string>

#include "providers/shared/image_probe.h"
#include "providers/shared/image_ref.h"
#include "src/status.h"
#include "src/transport.h"

namespace fleet {

// `<cli> image inspect --format kInspectFormat <what>` on the node. A miss is
// a lookup with found == false; a transport failure or an unexpected CLI
// error is an error Status.
Result<ImageLookup> InspectImage(Transport* t, const std::string& cli, const std::string& what);

struct FoundImage {
  bool present = false;
  std::string id;   // config digest, "sha256:<hex>"
  std::string how;  // "by registry digest", "by config digest", "by fleet's tag"
  // A name or ID the engine holds a broken record of (ImageLookup::broken);
  // not present: the step removes it (RemoveBrokenImage) before it loads.
  std::string broken;
};

// Whether the node holds `ref`'s image: by registry digest (pinned) or tag
// (floating), else by `config` (an image ID; may be empty: unknown), else by
// fleet's tag when `config` is unknown.
Result<FoundImage> FindImage(Transport* t, const std::string& cli, const ImageRef& ref,
                             const std::string& config);

}  // namespace fleet

#endif  // FLEET_PROVIDERS_SHARED_FIND_IMAGE_H_
