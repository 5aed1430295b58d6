#include "providers/model/hub_sizes.h"

#include <algorithm>

namespace fleet {

Listing ListingFromHub(const HubListing& h) {
  Listing l;
  l.reserve(h.files.size());
  for (const HubFile& f : h.files) l.push_back(ListedFile{f.path, f.size, f.blob});
  std::sort(l.begin(), l.end(),
            [](const ListedFile& a, const ListedFile& b) { return a.path < b.path; });
  return l;
}

HubSizes AskHubSizes(HubApi* hub, const std::string& repo, const std::string& revision) {
  HubSizes s;
  if (hub == nullptr) return s;
  Result<HubListing> r = hub->ListFiles(repo, revision);
  if (r.ok()) {
    s.files = ListingFromHub(*r);
    return s;
  }
  s.unreachable = r.status().unreachable();
  s.error = r.status().message();
  return s;
}

}  // namespace fleet
