// Image references as fleet uses them on a node: what to look up, what to
// pull, and the name fleet gives an image it copied.
//
// A registry digest (the manifest's, "repo@sha256:D") names an image only on
// nodes that pulled it from a registry: `save | load` to another node keeps
// the image ID (the config's digest) but drops D (DESIGN.md). So fleet
// identifies a copied image by its config digest, and tags it with a name
// derived from D so that the next probe finds it by name.
#ifndef FLEET_PROVIDERS_SHARED_IMAGE_REF_H_
#define FLEET_PROVIDERS_SHARED_IMAGE_REF_H_

#include <string>
#include <string_view>
#include <vector>

namespace fleet {

struct ImageRef {
  std::string text;        // as written in the manifest
  std::string repository;  // "127.0.0.1:5000/team/vllm" (registry port kept)
  std::string tag;         // "" when the ref has none
  std::string digest;      // "sha256:<64 hex>"; "" for a floating ref

  bool pinned() const { return !digest.empty(); }
  // What to pull and look up: "repository@digest" when pinned (a tag next
  // to a digest only confuses the CLIs), else "repository:tag" (or the bare
  // repository, which the CLIs read as :latest).
  std::string Lookup() const;
  // The name fleet tags a copied image with, "repository:sha256-<64 hex>"
  // (pinned refs; a tag may hold 128 characters). Empty when floating.
  std::string FleetTag() const;
  // The mark of an image fleet itself pulled or copied,
  // "repository:staged-sha256-<64 hex>": FleetTag is also given to an image
  // found in place under another name (so that the next probe finds it), so
  // only this one says fleet staged it (--purge of one it has no record of).
  std::string StagedTag() const;
  // "repository:tag" when the ref has a tag, else "".
  std::string TaggedName() const;
};

// Splits a manifest ref (already validated by the manifests loader).
ImageRef ParseImageRef(std::string_view text);

// "sha256:<hex>" for an image ID printed either way (podman prints bare hex,
// docker "sha256:<hex>"); "" for anything that is not 64 lowercase hex.
std::string NormalizeImageId(std::string_view id);

// True when one of `repo_digests` ("name@sha256:...", any repository name)
// carries `digest`.
bool HasRepoDigest(const std::vector<std::string>& repo_digests, const std::string& digest);

// The first 12 hex digits of a digest or ID, for messages ("sha256:" dropped).
std::string ShortId(std::string_view digest_or_id);

}  // namespace fleet

#endif  // FLEET_PROVIDERS_SHARED_IMAGE_REF_H_
