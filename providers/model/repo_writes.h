// What a model's staging writes into a repo folder on a node besides the
// files it copies: links to blobs already there, refs, and the byte count
// a download's progress reads. Each is a .sh file beside this one with its
// values (node_script.h).
#ifndef FLEET_PROVIDERS_MODEL_REPO_WRITES_H_
#define FLEET_PROVIDERS_MODEL_REPO_WRITES_H_

#include <string>
#include <utility>
#include <vector>

#include "providers/shared/hub_remote.h"

namespace fleet {

// (snapshot path, relative link to its blob) pairs.
using BlobLinks = std::vector<std::pair<std::string, std::string>>;
// (ref name, commit) pairs.
using RefValues = std::vector<std::pair<std::string, std::string>>;

// link_blobs.sh: links each path of `loc`'s snapshot (in the hub layout's
// folder) to its blob; exit 1 at the first that fails.
std::string LinkBlobsScript(const HubLocation& loc, const BlobLinks& links);

// write_refs.sh: each ref of `refs` in `loc`'s repo folder. `swap`: each
// through a temporary file renamed over it, in the folder RepoPrelude finds
// (the branch a serve loads); else written in place in the hub layout's
// folder (refs the source has and the target lacks).
std::string WriteRefsScript(const HubLocation& loc, const RefValues& refs, bool swap);

// blob_bytes.sh: the bytes of `loc`'s repo's blobs, finished or not, one
// number, in either layout.
std::string BlobBytesScript(const HubLocation& loc);

}  // namespace fleet

#endif  // FLEET_PROVIDERS_MODEL_REPO_WRITES_H_
