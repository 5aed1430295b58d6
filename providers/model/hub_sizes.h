// What the Hugging Face Hub lists for a model's revision, as the model
// provider uses it: the bytes a download brings, known before it starts
// (plan time, and again in apply just before the download), so that a
// download that cannot fit is refused with both figures before any byte
// moves (the log's 636 GB onto dgx5's 251 GB free).
#ifndef FLEET_PROVIDERS_MODEL_HUB_SIZES_H_
#define FLEET_PROVIDERS_MODEL_HUB_SIZES_H_

#include <optional>
#include <string>

#include "providers/shared/completeness.h"
#include "src/hub_api.h"

namespace fleet {

// The Hub's files as a reference listing (sorted by path).
Listing ListingFromHub(const HubListing& h);

struct HubSizes {
  std::optional<Listing> files;  // what the Hub lists
  bool unreachable = false;      // the Hub could not be asked
  std::string error;             // why there is no listing ("" with files)
};

// Asks `hub` (null: not asked, no files, no error) for `repo` at
// `revision` (a commit, or a branch).
HubSizes AskHubSizes(HubApi* hub, const std::string& repo, const std::string& revision);

}  // namespace fleet

#endif  // FLEET_PROVIDERS_MODEL_HUB_SIZES_H_
