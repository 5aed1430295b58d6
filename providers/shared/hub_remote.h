// What the model steps run on a node, each one command over a Transport:
// probe one model, read its safetensors headers and indexes, hash its blobs
// in place, fix the legacy layout and absolute links, list blobs.
#ifndef FLEET_PROVIDERS_SHARED_HUB_REMOTE_H_
#define FLEET_PROVIDERS_SHARED_HUB_REMOTE_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "providers/shared/completeness.h"
#include "providers/shared/hub_cache.h"
#include "src/status.h"
#include "src/transport.h"

namespace fleet {

// Where a model lives: a hub cache folder on the node behind a transport.
struct HubLocation {
  std::string cache;     // node path (may start with ~/)
  std::string repo;      // org/name
  std::string revision;  // 40 hex
};

// Sets c, d, r and m (the repo folder: hub layout, else the legacy one) in
// a node-side script.
std::string RepoPrelude(const HubLocation& loc);

// Runs the probe fragment of `loc` on its own. With `branch`, the snapshot
// probed is the one refs/<branch> names on the node (loc.revision unused).
Result<HubProbe> ProbeHub(Transport* t, const HubLocation& loc, const std::string& branch = "");

struct SnapshotHeaders {
  std::vector<HeaderSample> headers;           // every *.safetensors
  std::map<std::string, std::string> indexes;  // every *.safetensors.index.json
};

// Reads, for every .safetensors file of the snapshot, its size, its 8-byte
// header length and the header itself (when the length is in bounds), and
// every safetensors index. One command; the output is framed so that any
// header bytes pass through.
Result<SnapshotHeaders> ReadSnapshotHeaders(Transport* t, const HubLocation& loc);

// The script ReadSnapshotHeaders runs (exits 3 when the snapshot is absent),
// for a probe fragment that reads the headers in the plan's round trip.
std::string SnapshotHeadersScript(const HubLocation& loc);

// Parses ReadSnapshotHeaders' framed output (exposed for tests).
Result<SnapshotHeaders> ParseHeaderStream(const std::string& out);

// What a deep verify on the node found, and what it cost the node.
struct NodeHashReport {
  std::vector<std::string> problems;  // one per file that does not match its blob name
  int files_at_once = 0;              // hashing processes run at once (0: not reported)
  double cpu_seconds = -1;            // the hashing processes' user+sys CPU (-1: not reported)
  // What hashed the sha256 blobs: "fleet-probe", "openssl dgst", "sha256sum"
  // on a node, "in-process EVP" here; "" when not reported.
  std::string hasher;
};

// Hashes the listed files in place on the node (the installed fleet-probe's
// --sha256 mode, else OpenSSL's CLI, else sha256sum, for sha256 blobs; git's
// blob sha1 for the others), `parallel` files at a time, largest first; when
// `parallel` <= 0, as many as the node has cores, or all at once when that is
// up to four per core.
// `on_file` is called as each file is done (path, size), for progress.
Result<NodeHashReport> DeepVerifyOnNode(
    Transport* t, const HubLocation& loc, const Listing& files, int parallel,
    const std::function<void(const std::string& path, uint64_t size)>& on_file);

// Reads the hashing script's trailer on stderr ("fleet-hasher NAME" before
// "fleet-hash-times P" and bash's `times` lines) into `report`. Exposed for
// tests.
void ParseNodeHashTimes(const std::string& err, NodeHashReport* report);

// Legacy layout: makes <cache>/models--x a RELATIVE symlink to
// ../models--x (an absolute one dangles inside a container whose mount
// root differs). Idempotent.
Status FixLegacyLayout(Transport* t, const HubLocation& loc);

// Rewrites absolute snapshot links that point into this repo's blobs as
// relative ones (../../blobs/<blob>, deeper for files in subfolders).
Status MakeLinksRelative(Transport* t, const HubLocation& loc,
                         const std::vector<std::string>& paths);

// The blobs already in the repo folder (name -> size), complete ones only.
Result<std::map<std::string, uint64_t>> ListBlobs(Transport* t, const HubLocation& loc);

// Removes revision `loc.revision` from the cache (only on request: `--purge`):
// its snapshot, the blobs no other snapshot links to, the refs naming it,
// its staged mark (staged_mark.h), and the repo folder (and a legacy-layout link to it) when
// nothing is left. Sets *freed to the bytes removed. Idempotent.
Status RemoveModelRevision(Transport* t, const HubLocation& loc, uint64_t* freed);

// "../../blobs/<blob>" for a snapshot file at `path` (one more "../" per
// folder in the path).
std::string RelativeBlobLink(const std::string& path, const std::string& blob);

}  // namespace fleet

#endif  // FLEET_PROVIDERS_SHARED_HUB_REMOTE_H_
