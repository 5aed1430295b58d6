// The image probe: what fleet knows of one image on a node, and the
// fragment that asks a node's container CLI about a floating ref.
//
// Pinned refs (repo@sha256:D) are answered from the node's image listing
// (image_listing.h, one per node and plan): the image whose RepoDigests carry
// D, else the one carrying fleet's tag (ImageRef::FleetTag), since `save |
// load` drops D. A floating ref (repo:tag, allow_floating) keeps its own
// `<cli> image inspect repo:tag`: which image a tag names (short names,
// docker.io/library, podman's aliases) is the CLI's to resolve, and a listing
// would have to copy that logic. Never `image ls REF` (it prints nothing for
// a `repo@sha256:` reference, the log's "pinned recipe looks absent" trap)
// and never `.Digest` (podman may report another digest than the
// registry's). Whether what was found counts as "present" is the diff's
// call: it compares IDs across nodes.
#ifndef FLEET_PROVIDERS_SHARED_IMAGE_PROBE_H_
#define FLEET_PROVIDERS_SHARED_IMAGE_PROBE_H_

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "providers/shared/image_ref.h"

namespace fleet {

// One lookup: in the node's image listing (pinned refs), or by `image
// inspect` (a floating ref).
struct ImageLookup {
  bool tried = false;
  bool found = false;
  std::vector<std::string> repo_digests;
  std::string id;     // normalised "sha256:<hex>"
  std::string error;  // a failure other than "no such image" (daemon down, storage broken)
  // The engine holds a record of it that it cannot read (podman: its
  // manifest missing after a load that a crash cut short) and asks for its
  // removal; not found, no error: the step removes it and loads again.
  bool broken = false;
};

// An image on the node carrying fleet's tag ("repo:sha256-<64 hex>",
// ImageRef::FleetTag): fleet pulled or copied it there.
struct FleetTagged {
  std::string name;     // the tag
  std::string id;       // normalised "sha256:<hex>"
  bool staged = false;  // it also carries ImageRef::StagedTag: fleet pulled or copied it
};

struct ImageProbe {
  bool cli_found = true;
  ImageLookup by_ref;   // ref.Lookup(): by registry digest when pinned
  ImageLookup by_name;  // ref.FleetTag(); tried only when by_ref found nothing
  // Every image on the node carrying fleet's tag (any repository), so that
  // the plan can name those this state does not know.
  std::vector<FleetTagged> fleet_tagged;

  nlohmann::json ToJson() const;
  static ImageProbe FromJson(const nlohmann::json& j);
};

// The `--format` both the probe and the steps give `image inspect`.
inline constexpr const char* kInspectFormat = "{{json .RepoDigests}} {{.Id}}";

// The tag fleet gives what it stages, parsed back: the registry digest
// "sha256:<hex>" its tag carries, "" when `name` is not one of fleet's tags.
std::string DigestOfFleetTag(const std::string& name);
// The same for ImageRef::StagedTag.
std::string DigestOfStagedTag(const std::string& name);
// "sha256:" + the 64 lowercase hex digits of `name` from `at` on; "" else.
std::string DigestAfter(const std::string& name, size_t at);

// The fragment for a floating `ref` on a node whose container CLI is `cli`:
// `image inspect` of ref.Lookup(), one "ref <exit status> <output>" line.
std::string ImageProbeScript(const std::string& cli, const ImageRef& ref);

// Parses the fragment's output (lines "ref found ...", "cli missing").
ImageProbe ParseImageProbe(const std::string& output);

// Parses what `<cli> image inspect --format kInspectFormat X 2>&1` printed,
// given its exit status (0: found). Warnings the CLI printed around the
// answer are skipped; "no such image" / "image not known" is a plain miss.
ImageLookup ParseInspect(int exit_code, const std::string& output);

// sh for one image inspect of `what` (a name or an ID) on a node whose
// container CLI is `cli`: GET /images/WHAT/json through the engine's API
// where it answers (EngineSocketScript's socket, the installed fleet-probe:
// no CLI start, ~50-95 ms of the node's CPU each), else `<cli> image inspect
// --format kInspectFormat WHAT 2>&1`. Exits with the CLI's status, 0 on the
// API's path. ParseImageInspect reads it.
std::string ImageInspectScript(const std::string& cli, const std::string& what);
ImageLookup ParseImageInspect(int exit_code, const std::string& output);

}  // namespace fleet

#endif  // FLEET_PROVIDERS_SHARED_IMAGE_PROBE_H_
