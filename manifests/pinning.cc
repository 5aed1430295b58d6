#include "manifests/pinning.h"

#include <algorithm>
#include <cctype>

namespace fleet {

namespace {

bool IsLowerHex(std::string_view s, size_t length) {
  return s.size() == length && std::all_of(s.begin(), s.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

// The hub cache's directory for a repo: "org/name" -> "models--org--name".
std::string HubCacheDirName(const std::string& repo) {
  std::string dashed = "models--" + repo;
  for (size_t p = dashed.find('/'); p != std::string::npos;
       p = dashed.find('/', p + 2)) {
    dashed.replace(p, 1, "--");
  }
  return dashed;
}

}  // namespace

ImageRefKind ClassifyImageRef(std::string_view ref) {
  if (ref.empty() || ref.find_first_of(" \t\r\n") != std::string_view::npos) {
    return ImageRefKind::kMalformed;
  }
  const size_t at = ref.find('@');
  if (at == std::string_view::npos) return ImageRefKind::kFloating;
  if (at == 0) return ImageRefKind::kMalformed;
  constexpr std::string_view kAlgo = "sha256:";
  const std::string_view digest = ref.substr(at + 1);
  if (digest.substr(0, kAlgo.size()) != kAlgo ||
      !IsLowerHex(digest.substr(kAlgo.size()), 64)) {
    return ImageRefKind::kBadDigest;
  }
  return ImageRefKind::kPinned;
}

std::string ImageRepository(std::string_view ref) {
  std::string_view repo = ref.substr(0, ref.find('@'));
  // A ':' after the last '/' starts a tag; one before it is a registry port.
  const size_t slash = repo.rfind('/');
  const size_t colon = repo.rfind(':');
  if (colon != std::string_view::npos &&
      (slash == std::string_view::npos || colon > slash)) {
    repo = repo.substr(0, colon);
  }
  return std::string(repo);
}

RevisionKind ClassifyRevision(std::string_view revision) {
  if (IsPinnedRevision(revision)) return RevisionKind::kPinned;
  if (revision.empty()) return RevisionKind::kMalformed;
  const bool hex = std::all_of(revision.begin(), revision.end(), [](char c) {
    return std::isxdigit(static_cast<unsigned char>(c));
  });
  if (hex && revision.size() == 40) return RevisionKind::kUppercase;
  // Characters git allows in branch and tag names that people use.
  const bool ref_name =
      std::all_of(revision.begin(), revision.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || c == '.' ||
               c == '_' || c == '-' || c == '/';
      });
  return ref_name ? RevisionKind::kFloating : RevisionKind::kMalformed;
}

bool IsPinnedRevision(std::string_view revision) {
  return IsLowerHex(revision, 40);
}

std::string FloatingImageMessage(const std::string& image,
                                 const std::string& ref) {
  return "image '" + image + "': ref '" + ref +
         "' floats (a tag can change under you); pin it: " +
         ImageRepository(ref) +
         "@sha256:<digest> (get it with `podman image inspect --format "
         "'{{index .RepoDigests 0}}'` or `docker buildx imagetools inspect`), "
         "or set "
         "allow_floating: true";
}

std::string FloatingRevisionMessage(const std::string& model,
                                    const std::string& repo,
                                    const std::string& revision) {
  return "model '" + model + "': revision '" + revision +
         "' floats (a branch or tag moves with every push to " + repo +
         "); pin the 40-hex commit id (the hub's \"Files and versions\" "
         "history, or "
         "`cat <hf_cache>/" +
         HubCacheDirName(repo) + "/refs/" + revision +
         "` on a node that has it), or set allow_floating: true";
}

}  // namespace fleet
