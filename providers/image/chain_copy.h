// An image fan-out as one chain (CopyRoute::chain): `<cli> save <config>`
// on the source streamed through every target at once (FabricChain), each
// one's `<cli> load` fed as the bytes pass, so the source's link carries
// the image once. The first target step of the fan-out runs it for all
// (SharedWork); each step then checks and names its own copy as after any
// copy (FinishImageCopy, the staged tag).
//
// A target lost mid-transfer (its node gone) fails the stream of every
// target behind it; those that are still reachable are sent the image
// again, as a chain of their own, from the nearest target before them
// that holds it whole (else the source), and the lost one is named. A
// re-apply stages what is still missing.
#ifndef FLEET_PROVIDERS_IMAGE_CHAIN_COPY_H_
#define FLEET_PROVIDERS_IMAGE_CHAIN_COPY_H_

#include <map>
#include <string>
#include <vector>

#include "manifests/manifest.h"
#include "providers/image/image_steps.h"
#include "src/plan.h"

namespace fleet {

struct ImageChainDelivery {
  struct Target {
    bool delivered = false;           // its load took the whole stream
    std::vector<std::string> loaded;  // what its load named
    bool already = false;             // it held the image before the chain ran
    // No byte went to it over the chain (the fabric not usable to it, no
    // connection made): its step copies on its own, as without a chain.
    bool on_its_own = false;
    bool lost = false;    // its node went away mid-transfer
    std::string problem;  // when none of the above: why not, naming the node
    std::string via;      // delivered by the re-route: the node that chain started at
  };
  std::map<std::string, Target> targets;  // by node
};

// Runs `route.chain` for the image `config` held by `route.from`, timed by
// `clock` (the step's). Never fails as a whole: what went wrong is per
// target.
ImageChainDelivery RunImageChain(const CopyRoute& route, const std::string& config,
                                 const Manifest& m, const ProgressFn& progress, Clock* clock);

}  // namespace fleet

#endif  // FLEET_PROVIDERS_IMAGE_CHAIN_COPY_H_
