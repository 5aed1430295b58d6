#include "providers/shared/image_listing.h"

#include <algorithm>
#include <set>
#include <sstream>

#include "providers/shared/cli_error.h"
#include "providers/shared/image_listing_sh.h"
#include "providers/shared/node_script.h"
#include "src/shell_quote.h"

namespace fleet {

namespace {

std::vector<std::string> StringsOf(const nlohmann::json& j) {
  std::vector<std::string> out;
  if (j.is_array())
    for (const auto& s : j)
      if (s.is_string()) out.push_back(s.get<std::string>());
  return out;
}

// "img <id> <RepoDigests json> <RepoTags json>": one image of the inspect.
bool ParseListedLine(const std::string& line, ListedImage* out) {
  std::istringstream words(line);
  std::string img, id, digests, tags, extra;
  if (!(words >> img >> id >> digests >> tags) || img != "img" || (words >> extra)) return false;
  out->id = NormalizeImageId(id);
  const nlohmann::json d = nlohmann::json::parse(digests, nullptr, false);
  const nlohmann::json t = nlohmann::json::parse(tags, nullptr, false);
  if (out->id.empty() || d.is_discarded() || t.is_discarded()) return false;
  out->repo_digests = StringsOf(d);
  out->tags = StringsOf(t);
  return true;
}

// An image removed between `image ls` and `image inspect` is no failure.
bool OnlyMisses(const std::string& messages) {
  std::istringstream in(messages);
  for (std::string line; std::getline(in, line);) {
    const std::string l = AsciiLower(line);
    if (l.find_first_not_of(" \t\r") == std::string::npos) continue;
    if (l.find("no such image") == std::string::npos &&
        l.find("image not known") == std::string::npos &&
        l.find("no such object") == std::string::npos && l.find("warn") == std::string::npos)
      return false;
  }
  return true;
}

std::string Joined(const std::string& messages) {
  std::string s = messages;
  std::replace(s.begin(), s.end(), '\n', ' ');
  const size_t b = s.find_first_not_of(' ');
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(' ') - b + 1).substr(0, 300);
}

// The ID of the broken record podman's message names when it asks for the
// record's removal ('locating item named "manifest" for image with ID "<hex>"
// (consider removing the image ...)', 'retrieving label for image "<hex>": you
// may need to remove the image'); "" when the message is another.
std::string BrokenRecordId(const std::string& messages) {
  const std::string lower = AsciiLower(messages);
  if (lower.find("consider removing the image") == std::string::npos &&
      lower.find("you may need to remove the image") == std::string::npos)
    return "";
  for (const char* before : {"image with id \"", "label for image \""})
    if (const size_t at = lower.find(before); at != std::string::npos) {
      const size_t from = at + std::string(before).size();
      const size_t to = lower.find('"', from);
      if (to != std::string::npos) return NormalizeImageId(lower.substr(from, to - from));
    }
  return "";
}

// Docker names hub images "repo" and "library/x" short ("x"), podman in
// full ("docker.io/library/x"), and podman tags a name without a registry
// as "localhost/name": one spelling for comparing fleet's tags.
std::string Familiar(std::string name) {
  for (const char* prefix : {"docker.io/", "index.docker.io/", "localhost/", "library/"})
    if (name.rfind(prefix, 0) == 0) name = name.substr(std::string(prefix).size());
  return name;
}

}  // namespace

std::string ImageListingScript(const std::string& cli) {
  // Inline, not `sh -c`: it runs in the node facts probe on every plan, and
  // a process more costs each node a few ms.
  return ScriptWithValues({{"ilc", ShellQuote(cli)}}, kImageListingScript, kImageListingScriptSize);
}

ImageListing ParseImageListing(const std::string& output) {
  ImageListing l;
  std::string step, messages;
  int rc = 0;
  // podman's `image ls` repeats an image's row for each of its tags: a row
  // seen before adds nothing (the node sends them all, an awk less there).
  std::set<std::string> rows;
  std::istringstream in(output);
  for (std::string line; std::getline(in, line);) {
    if (line == "images=cli-missing") {
      l.listed = true;
      l.cli_found = false;
    } else if (line.rfind("images=", 0) == 0) {
      std::istringstream words(line.substr(7));
      l.listed = static_cast<bool>(words >> step >> rc);
    } else if (line.rfind("image_out=", 0) == 0) {
      ListedImage image;
      if (ParseListedLine(line.substr(10), &image)) {
        if (rows.insert(line).second) MergeListedImage(std::move(image), &l.images);
      } else {
        messages += line.substr(10) + "\n";
      }
    }
  }
  if (!l.listed || rc == 0 || (step == "inspect" && OnlyMisses(messages))) return l;
  l.images.clear();
  l.broken_id = BrokenRecordId(messages);
  l.error = "`image " + step + "` exited " + std::to_string(rc) + ": " +
            (l.broken_id.empty() ? Joined(messages)
                                 : "the engine holds a broken record of image " + l.broken_id +
                                       " (a `load` cut short may leave one) and lists no image "
                                       "until it is removed (" +
                                       Joined(messages) + ")");
  return l;
}

std::vector<FleetTagged> FleetTaggedIn(const ImageListing& listing) {
  std::vector<FleetTagged> out;
  for (const ListedImage& image : listing.images) {
    bool staged = false;
    for (const std::string& tag : image.tags) staged = staged || !DigestOfStagedTag(tag).empty();
    for (const std::string& tag : image.tags)
      if (!DigestOfFleetTag(tag).empty()) out.push_back({tag, image.id, staged});
  }
  return out;
}

namespace {

ImageLookup Found(const ListedImage& image) {
  ImageLookup l;
  l.tried = l.found = true;
  l.repo_digests = image.repo_digests;
  l.id = image.id;
  return l;
}

// The image whose RepoDigests carry `ref`'s digest, under any name.
ImageLookup ByRegistryDigest(const ImageListing& listing, const ImageRef& ref) {
  for (const ListedImage& image : listing.images)
    if (HasRepoDigest(image.repo_digests, ref.digest)) return Found(image);
  ImageLookup miss;
  miss.tried = true;
  return miss;
}

// The image carrying fleet's tag for `ref` (ImageRef::FleetTag).
ImageLookup ByFleetTag(const ImageListing& listing, const ImageRef& ref) {
  const std::string name = Familiar(ref.FleetTag());
  for (const ListedImage& image : listing.images)
    for (const std::string& tag : image.tags)
      if (Familiar(tag) == name) return Found(image);
  ImageLookup miss;
  miss.tried = true;
  return miss;
}

}  // namespace

ImageProbe ImageProbeFromListing(const ImageListing& listing, const ImageRef& ref) {
  ImageProbe p;
  p.cli_found = listing.cli_found;
  if (!listing.listed || !listing.cli_found || !listing.error.empty()) return p;
  p.fleet_tagged = FleetTaggedIn(listing);
  if (!ref.pinned()) return p;
  p.by_ref = ByRegistryDigest(listing, ref);
  if (!p.by_ref.found && !ref.FleetTag().empty()) p.by_name = ByFleetTag(listing, ref);
  return p;
}

nlohmann::json ImageListing::ToJson() const {
  nlohmann::json j = {{"listed", listed}, {"cli_found", cli_found}, {"error", error}};
  if (!broken_id.empty()) j["broken_id"] = broken_id;
  j["images"] = nlohmann::json::array();
  for (const ListedImage& i : images)
    j["images"].push_back({{"id", i.id}, {"repo_digests", i.repo_digests}, {"tags", i.tags}});
  return j;
}

ImageListing ImageListing::FromJson(const nlohmann::json& j) {
  ImageListing l;
  if (!j.is_object()) return l;
  l.listed = j.value("listed", false);
  l.cli_found = j.value("cli_found", true);
  l.error = j.value("error", "");
  l.broken_id = j.value("broken_id", "");
  if (auto it = j.find("images"); it != j.end() && it->is_array())
    for (const auto& i : *it)
      if (i.is_object())
        l.images.push_back({i.value("id", ""), StringsOf(i.value("repo_digests", nlohmann::json())),
                            StringsOf(i.value("tags", nlohmann::json()))});
  return l;
}

void MergeListedImage(ListedImage image, std::vector<ListedImage>* images) {
  for (ListedImage& known : *images)
    if (known.id == image.id) {
      known.repo_digests.insert(known.repo_digests.end(), image.repo_digests.begin(),
                                image.repo_digests.end());
      known.tags.insert(known.tags.end(), image.tags.begin(), image.tags.end());
      return;
    }
  images->push_back(std::move(image));
}

}  // namespace fleet
