// Is a model complete on a node? The decisions, as pure functions.
//
// Complete means: every file of the revision is there with the right size,
// the links resolve, no shard is cut short (safetensors headers), and the
// index's weight_map is covered. The file list comes from a reference: the
// state record of a verified copy, else the source's snapshot (peer node or
// store, probed in the same plan). A marker file or a non-empty folder is
// never proof: without a reference the model is "unverified" and apply
// verifies the headers and the index before recording it.
#ifndef FLEET_PROVIDERS_SHARED_COMPLETENESS_H_
#define FLEET_PROVIDERS_SHARED_COMPLETENESS_H_

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "providers/shared/hub_cache.h"
#include "providers/shared/safetensors.h"

namespace fleet {

// One file of a revision, as a reference lists it.
struct ListedFile {
  std::string path;  // relative to the snapshot
  uint64_t size = 0;
  std::string blob;  // blob name (sha256 for LFS files, git sha1 otherwise); "" if unknown
};
using Listing = std::vector<ListedFile>;  // sorted by path

// The files of a probed snapshot that resolve (broken links are left out).
Listing ListingFromProbe(const HubProbe& p);
uint64_t ListingBytes(const Listing& l);
nlohmann::json ListingToJson(const Listing& l);
Listing ListingFromJson(const nlohmann::json& j);

struct Completeness {
  bool snapshot = false;  // snapshots/<rev>/ exists
  bool complete = false;  // nothing missing against the reference (or, with no
                          // reference, nothing visibly wrong: still unverified)
  bool verified_against_reference = false;
  std::vector<std::string> problems;        // each names a file
  std::vector<std::string> notes;           // layout remarks that do not make it incomplete
  std::vector<std::string> absolute_links;  // paths to make relative
  uint64_t present_bytes = 0;               // of reference files already right
  uint64_t missing_bytes = 0;  // to transfer (partial .incomplete blobs counted as done)
  size_t files_ok = 0;
  size_t files_total = 0;
};

// Compares a probed snapshot with `reference` (may be null). `revision` is
// for the refs check.
Completeness CheckCompleteness(const HubProbe& target, const Listing* reference,
                               const std::string& revision);

// What a verify step read on the node for one .safetensors file.
struct HeaderSample {
  std::string path;
  uint64_t size = 0;
  uint64_t header_length = 0;
  std::string header;  // the N bytes of JSON (empty when N was out of bounds)
};

// Checks every safetensors header and every *.safetensors.index.json
// (`indexes`: path -> content) of a snapshot whose files are `present`.
// Returns the problems, each naming its file; empty = fine.
std::vector<std::string> CheckSafetensors(const std::vector<HeaderSample>& headers,
                                          const std::map<std::string, std::string>& indexes,
                                          const Listing& present);

// Joins problems into one line for an error, at most `max` of them.
std::string JoinProblems(const std::vector<std::string>& problems, size_t max = 8);

}  // namespace fleet

#endif  // FLEET_PROVIDERS_SHARED_COMPLETENESS_H_
