// A model fan-out as one chain (CopyRoute::chain): each file streamed from
// the source through every target that lacks it at once (FabricChain), so
// the source's link carries it once; every target checks each file against
// its blob name before the rename, as after any copy over the fabric.
// Run by the first target step of the fan-out for all (SharedWork); each
// step then copies on its own whatever the chain did not bring it (a file
// resumed from a partial .incomplete, a file whose chain broke) and
// verifies the whole copy as it always does.
//
// Files go `streams` at once, each its own chain with its own connections
// (one TLS stream binds one core per hop: parallel chains use more). A
// node lost mid-file fails that file for the hops behind it (their own
// steps fetch it from the source, resuming) and is left out of the chains
// of the files after it, which still leave the source once.
#ifndef FLEET_PROVIDERS_MODEL_CHAIN_COPY_H_
#define FLEET_PROVIDERS_MODEL_CHAIN_COPY_H_

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>

#include "manifests/manifest.h"
#include "providers/shared/completeness.h"
#include "providers/shared/hub_remote.h"
#include "src/clock.h"
#include "src/plan.h"

namespace fleet {

struct ModelChainDelivery {
  struct Target {
    std::set<std::string> hashed;  // files that arrived whole and matched their blob name
    uint64_t bytes = 0;            // what arrived over the chain
    bool lost = false;             // its node went away mid-transfer
    std::string problem;           // the first thing that went wrong ("" none)
  };
  std::map<std::string, Target> targets;  // by node
  int streams = 0;                        // chains that ran at once
};

// Runs `route.chain` for the files of `reference` in `src` (a node's hub
// cache on route.from), into each hop's node cache (the manifest's
// hf_cache), `streams` files at once, timed by `clock` (the step's). Never
// fails as a whole.
ModelChainDelivery RunModelChain(const CopyRoute& route, const HubLocation& src,
                                 const Listing& reference, const Manifest& m, int streams,
                                 const std::function<void(const std::string&)>& progress,
                                 Clock* clock);

}  // namespace fleet

#endif  // FLEET_PROVIDERS_MODEL_CHAIN_COPY_H_
