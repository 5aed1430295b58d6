// ImageProvider (`image.<name>@<node>`): a container image present on a node
// by digest.
//
// Scope: an image is wanted on the nodes of the deployments that use it and
// on the nodes its `nodes:` lists.
//
// Presence (decided in Diff, from the probe of every node): the node has the
// image when `<cli> image inspect repo@sha256:D` finds an image whose
// RepoDigests carry D (under any repository name), or when it has an image
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

#include "src/provider.h"

namespace fleet {

class ImageProvider : public Provider {
 public:
  std::string type() const override { return "image"; }
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
  Result<nlohmann::json> Apply(const PlanChange& change, const StepContext& ctx) const override;
};

}  // namespace fleet

#endif  // FLEET_PROVIDERS_IMAGE_IMAGE_PROVIDER_H_
