#include "providers/shared/image_ref.h"

#include <algorithm>

#include "manifests/pinning.h"

namespace fleet {

namespace {

constexpr std::string_view kSha256 = "sha256:";

bool IsLowerHex64(std::string_view s) {
  return s.size() == 64 && std::all_of(s.begin(), s.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

}  // namespace

std::string ImageRef::Lookup() const {
  if (pinned()) return repository + "@" + digest;
  return tag.empty() ? repository : repository + ":" + tag;
}

std::string ImageRef::FleetTag() const {
  // Not "sha256:...": no tag (substr threw on a digest under 7 characters).
  if (!pinned() || digest.compare(0, kSha256.size(), kSha256) != 0) return "";
  return repository + ":sha256-" + digest.substr(kSha256.size());
}

std::string ImageRef::StagedTag() const {
  const std::string fleet = FleetTag();
  if (fleet.empty()) return "";
  return repository + ":staged-" + fleet.substr(repository.size() + 1);
}

std::string ImageRef::TaggedName() const { return tag.empty() ? "" : repository + ":" + tag; }

ImageRef ParseImageRef(std::string_view text) {
  ImageRef r;
  r.text = std::string(text);
  r.repository = ImageRepository(text);
  const size_t at = text.find('@');
  if (at != std::string_view::npos) r.digest = std::string(text.substr(at + 1));
  std::string_view name = text.substr(0, at);
  if (name.size() > r.repository.size() + 1 && name[r.repository.size()] == ':')
    r.tag = std::string(name.substr(r.repository.size() + 1));
  return r;
}

std::string NormalizeImageId(std::string_view id) {
  if (id.substr(0, kSha256.size()) == kSha256) id.remove_prefix(kSha256.size());
  if (!IsLowerHex64(id)) return "";
  return std::string(kSha256) + std::string(id);
}

bool HasRepoDigest(const std::vector<std::string>& repo_digests, const std::string& digest) {
  if (digest.empty()) return false;
  return std::any_of(repo_digests.begin(), repo_digests.end(), [&](const std::string& rd) {
    size_t at = rd.rfind('@');
    return at != std::string::npos && rd.compare(at + 1, std::string::npos, digest) == 0;
  });
}

std::string ShortId(std::string_view digest_or_id) {
  if (digest_or_id.substr(0, kSha256.size()) == kSha256) digest_or_id.remove_prefix(kSha256.size());
  return std::string(digest_or_id.substr(0, 12));
}

}  // namespace fleet
