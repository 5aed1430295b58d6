// ImageProvider (`image.<name>@<node>`): a container image present on a node
// by digest.
//
// Scope: an image is wanted on the nodes of the deployments that use it and
// on the nodes its `nodes:` lists.
//
// Presence (decided in Diff, from the probe of every node): the node has the
// image when its image listing (image_listing.h, made once per node by the
// node's probe) has an image whose RepoDigests carry D (under any
// repository name), or when it has an image
// whose ID equals the config digest that D points to. That config digest is
// read where D is known (a node that pulled it: its ID), or from this
// resource's state record; copied images are found by the name fleet tags
// them with (ImageRef::FleetTag), since `save | load` drops D.
//
// A missing image is pulled by digest (`source: registry`) or copied from a
// node that has it (`source: node:<name>`, or `peers`: any node that has it,
// chosen at plan time): `<cli> save <config digest>` on the source streams
// through the controller into `<cli> load` on the target (StreamCopy), then
// the target must hold an image with that config digest, which fleet tags.
// A copy that fails (truncated stream, load error, wrong image) fails the
// step and removes what the load left.
//
// Destroy keeps images unless --purge, and so does rollback: they take long
// to stage.
// Containers are never started here (see run_args.h for deployments).
#ifndef FLEET_PROVIDERS_IMAGE_IMAGE_PROVIDER_H_
#define FLEET_PROVIDERS_IMAGE_IMAGE_PROVIDER_H_

#include <map>
#include <optional>
#include <string>

#include "providers/image/image_json.h"
#include "providers/shared/image_probe.h"
#include "providers/shared/image_ref.h"
#include "src/provider.h"

namespace fleet {

class ImageProvider : public Provider {
 public:
  std::string type() const override { return "image"; }
  Role role() const override { return Role::kImage; }
  std::vector<DesiredResource> Expand(const Manifest& m) const override;
  std::string ProbeScript(const DesiredResource& r, const NodeSpec& node) const override;
  ActualResource ParseProbe(const DesiredResource& r, const std::string& output,
                            const NodeFacts& facts) const override;
  PlanChange Diff(const DesiredResource& desired, const ActualResource& actual,
                  const ResourceRecord* record, const DiffContext& ctx) const override;
  // With --purge: destroy removes images fleet staged (pulled or copied),
  // and an image the manifests no longer name is removed from the nodes
  // fleet staged it on; never one the node had before fleet, and never while
  // a container (running or not) uses it.
  PlanChange DiffDestroy(const DesiredResource& desired, const ActualResource& actual,
                         const ResourceRecord* record, const DiffContext& ctx) const override;
  PlanChange DiffOrphan(const ResourceRecord& record, const DiffContext& ctx) const override;
  // Images carrying fleet's tag (fleet pulled or copied them) that neither
  // the state nor the manifests (on that node) know: named, and removed with
  // --purge, as DiffOrphan removes a recorded one.
  std::vector<PlanChange> DiffUnrecorded(const std::string& node,
                                         const DiffContext& ctx) const override;
  // They are read from the node's image listing (NodeFacts::images), which
  // the node's probe makes on every probed node.
  // A declared image present on its node, its registry digest verified
  // (RepoDigests, or its config digest against a node that has the digest):
  // the record apply would keep, `via` kViaAdopted when it carries fleet's
  // tag (so --purge may remove it later), kViaPresent otherwise.
  Result<nlohmann::json> Adopt(const DesiredResource& desired, const ActualResource& actual,
                               const DiffContext& ctx, const StepContext* node) const override;
  Result<nlohmann::json> Apply(const PlanChange& change, const StepContext& ctx) const override;
};

// The diff's named decisions and what they read, exposed for tests. Diff
// asks NotPinned, ProbeFailed, adds FloatingTagNotes, asks Present, LoadedNotNamed, else
// plans Missing and then PullFromRegistry or CopyFromNode.
namespace image_internal {

// What the probe of one node says about the image, judged against the
// config digest the registry digest points to (empty: unknown).
struct Judged {
  bool present = false;
  std::string id;
  std::string how;
  std::string other_id;  // fleet's tag names another image
};

// The config digest D points to, and where it was read: on a node that has
// D itself, else in the state record of this resource.
struct ConfigDigest {
  std::string id;
  std::string from;
};
ConfigDigest FindConfigDigest(const ImageRef& ref, const std::map<std::string, ImageProbe>& probes,
                              const ResourceRecord* record);

// What every decision reads.
struct ImageDiffInput {
  const DesiredResource& desired;
  const ImageWant& want;
  const ImageRef& ref;
  const ActualResource& actual;
  const DiffContext& ctx;
  const std::map<std::string, ImageProbe>& probes;  // by node
  const ImageProbe& here;
  const Judged& judged;  // of this node
  std::string what;      // "image <name> (<ref>)"
};

using Decision = std::optional<PlanChange>;

Decision NotPinned(const ImageDiffInput& in, const PlanChange& base);
Decision ProbeFailed(const ImageDiffInput& in, const PlanChange& base);
void FloatingTagNotes(const ImageDiffInput& in, PlanChange* c);
Decision Present(const ImageDiffInput& in, const ConfigDigest& config, const PlanChange& base);
Decision LoadedNotNamed(const ImageDiffInput& in, const ConfigDigest& config,
                        const PlanChange& base);
PlanChange Missing(const ImageDiffInput& in, const ConfigDigest& config, const PlanChange& base);
PlanChange PullFromRegistry(const ImageDiffInput& in, const ConfigDigest& config, PlanChange c);

// The node a copy reads from, and what the plan says about it; or a plan
// error in `error`.
struct CopySource {
  std::string from;
  std::string config;  // the config digest, read on the source when unknown
  std::string reason;
  std::string error;
};
CopySource FromNamedNode(const ImageDiffInput& in, const std::string& config);
CopySource FromPeers(const ImageDiffInput& in, const std::string& config);
PlanChange CopyFromNode(const ImageDiffInput& in, const ConfigDigest& config, PlanChange c);

}  // namespace image_internal

}  // namespace fleet

#endif  // FLEET_PROVIDERS_IMAGE_IMAGE_PROVIDER_H_
