// The mark fleet leaves on a model copy it staged, so that a copy whose
// state record is lost (a lost state file, another operator's state, a
// kill -9 between staging and the save) is still known as fleet's: the plan
// names it, and `--purge` may remove it. A copy without the mark (one the
// node had before fleet, an operator's download) is never removed.
//
//   <repo folder>/.fleet-staged/<commit>     one small file per revision
//
// inside the repo folder (models--org--name/, beside refs/ and snapshots/),
// where Hugging Face's cache scanners look at nothing but refs/, snapshots/
// and blobs/ (a folder at the cache's top would be a "corrupted repo" to
// them). The revision's removal (--purge) takes its mark with it.
#ifndef FLEET_PROVIDERS_MODEL_STAGED_MARK_H_
#define FLEET_PROVIDERS_MODEL_STAGED_MARK_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "providers/shared/hub_remote.h"

namespace fleet {

// sh that writes the mark of `loc` (its revision a commit), in the repo
// folder RepoPrelude finds (the hub layout's when there is none yet).
// Idempotent.
std::string WriteStagedMarkScript(const HubLocation& loc);

// A revision carrying the mark, as the inventory found it.
struct StagedCopy {
  std::string location;  // the node or store whose cache holds it
  std::string repo;      // org/name
  std::string revision;  // 40 hex
  uint64_t bytes = 0;    // of its snapshot's files
};

// The read-only fragment that lists every marked revision whose snapshot is
// there, in each (location, cache path) of `caches`: one line
// "staged<TAB>location<TAB>repo folder<TAB>revision<TAB>bytes" each.
std::string StagedMarkInventoryScript(
    const std::vector<std::pair<std::string, std::string>>& caches);

// Parses what the inventory printed (other lines, a folder that is no
// model's, a revision that is no commit: skipped; duplicates once).
std::vector<StagedCopy> ParseStagedMarks(const std::string& output);

// "models--org--name" -> "org/name", "models--gpt2" -> "gpt2"; "" for
// anything else (datasets, spaces, fleet's own lock folders).
std::string RepoOfDirName(const std::string& dir);

}  // namespace fleet

#endif  // FLEET_PROVIDERS_MODEL_STAGED_MARK_H_
