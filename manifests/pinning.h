// Pinning: images by registry digest, models by commit. A tag or a branch
// floats (the log's garbling Qwen ran a `:latest` that had moved), so both
// are errors unless the manifest opts in with allow_floating.
#ifndef FLEET_MANIFESTS_PINNING_H_
#define FLEET_MANIFESTS_PINNING_H_

#include <string>
#include <string_view>

namespace fleet {

enum class ImageRefKind {
  kPinned,     // repo@sha256:<64 lowercase hex> or repo:tag@sha256:<...>
  kFloating,   // no digest: repo, repo:tag
  kBadDigest,  // has '@' but not sha256: + 64 lowercase hex
  kMalformed,  // empty, spaces, empty repository
};

ImageRefKind ClassifyImageRef(std::string_view ref);

// The repository part of `ref`, without tag or digest:
// "localhost:5000/a/b:tag@sha256:..." -> "localhost:5000/a/b".
std::string ImageRepository(std::string_view ref);

// True for a full commit id: 40 lowercase hex digits.
bool IsPinnedRevision(std::string_view revision);

enum class RevisionKind {
  kPinned,     // 40 lowercase hex digits
  kUppercase,  // 40 hex digits with capitals: the hub's refs are lowercase
  kFloating,   // a branch or tag name ("main", "v1.0", "refs/pr/3")
  kMalformed,  // neither (spaces, braces, empty)
};

RevisionKind ClassifyRevision(std::string_view revision);

// The operator-facing text for a floating image ref: why it is a problem and
// the exact commands that give the digest to pin.
std::string FloatingImageMessage(const std::string& image,
                                 const std::string& ref);

// The same for a model revision that is a branch or tag name.
std::string FloatingRevisionMessage(const std::string& model,
                                    const std::string& repo,
                                    const std::string& revision);

}  // namespace fleet

#endif  // FLEET_MANIFESTS_PINNING_H_
