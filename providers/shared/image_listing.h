// The node's image listing: every image on the node with its ID (the config
// digest), its RepoDigests and its tags, read once per plan by the node's
// probe (NodeFacts::images) and shared by everything that asks about images
// there: each declared image's presence (ImageProbeFromListing) and the
// images carrying fleet's tag that no state knows (issue 12).
//
// Two CLI runs whatever the number of images: `<cli> image ls -q --no-trunc`
// names every image, one `<cli> image inspect` prints them all. Presence by
// registry digest is read from RepoDigests (never from `image ls`'s
// `.Digest`: podman may print another digest than the registry's), under
// any repository name, as podman's `image inspect repo@D` finds it and
// docker's does only after a look through every image's digests.
//
// A plan's listing may be old by the time apply runs: apply looks again on
// the node (image_steps.h, FindImage) before it pulls, copies or removes.
#ifndef FLEET_PROVIDERS_SHARED_IMAGE_LISTING_H_
#define FLEET_PROVIDERS_SHARED_IMAGE_LISTING_H_

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "providers/shared/engine_api.h"  // kListingCliEnv
#include "providers/shared/image_probe.h"
#include "providers/shared/image_ref.h"

namespace fleet {

struct ListedImage {
  std::string id;                         // normalised "sha256:<hex>"
  std::vector<std::string> repo_digests;  // "repo@sha256:..."
  std::vector<std::string> tags;          // "repo:tag"
};

// Adds `image` to `images`, one entry per ID: a second entry of the same ID
// adds its names (an engine lists an image once per name).
void MergeListedImage(ListedImage image, std::vector<ListedImage>* images);

struct ImageListing {
  bool listed = false;    // false: the node's probe did not list (or failed)
  bool cli_found = true;  // false: the node has no container CLI
  std::string error;      // the CLI failed: `image ls`/`image inspect` exited ...
  // The failure is podman's for a broken image record (a record whose
  // manifest a crash cut off, still carrying names): it lists no image until
  // that record is removed. Its ID, "sha256:<hex>"; "" for any other failure.
  std::string broken_id;
  std::vector<ListedImage> images;

  nlohmann::json ToJson() const;
  static ImageListing FromJson(const nlohmann::json& j);
};

// The fragment, for the node's probe script: lines "images=..." and
// "image_out=..." that ParseImageListing reads (other lines are left alone).
// It never exits, so it can run inside another fragment: the embedded
// image_listing.sh after its one assignment (`ilc=CLI`, quoted once), which
// spells kListingCliEnv out where it starts the CLI.
std::string ImageListingScript(const std::string& cli);

ImageListing ParseImageListing(const std::string& output);

// What the per-image decisions read, taken from the listing: for a pinned
// ref, by_ref is the image whose RepoDigests carry its digest, by_name (only
// when by_ref found nothing) the image carrying fleet's tag for it; for
// every ref, the images carrying fleet's tag. A floating ref's by_ref is its
// own probe's (ImageProbeScript): `repo:tag` resolution (short names,
// docker.io/library, podman's aliases) is the CLI's.
ImageProbe ImageProbeFromListing(const ImageListing& listing, const ImageRef& ref);

// The images carrying fleet's tag ("repo:sha256-<hex>"), staged when the
// same image also carries ImageRef::StagedTag.
std::vector<FleetTagged> FleetTaggedIn(const ImageListing& listing);

}  // namespace fleet

#endif  // FLEET_PROVIDERS_SHARED_IMAGE_LISTING_H_
