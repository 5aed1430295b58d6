// ModelProvider: a Hugging Face repo at a pinned revision, complete, in a
// hub cache: `model.<name>@<node>` for a node's own cache (store: local, the
// node's paths.hf_cache), `model.<name>@<store>` for a shared store (probed
// and staged through the first of the store's nodes not declared
// `power: {state: off}`; when that node does not answer, the plan names the
// others that mount the store).
//
// A floating revision (allow_floating, a branch such as `main`) is resolved
// on each node through refs/<branch> in the same probe; the plan says which
// commit it is on every copy (FLOATING REVISION) and when copies disagree.
// A node keeps the commit it holds complete; one without the branch (or
// with a commit neither it nor the source holds) gets the source's commit,
// and refs/<branch> is pointed at it.
//
// Scope: the nodes of the deployments that use the model, the model's own
// `nodes:`, and its source (a peer node or store is probed too: it is the
// reference file list, and it must itself be complete before anything is
// copied from it).
//
// Plan reads sizes and links only (one probe round trip per node, however
// many files); apply checks every safetensors header and the index, and
// with verify deep hashes every blob against its name. Staging refuses at
// plan time when the target lacks the space, takes a lock on the node so
// that a second apply does not start a duplicate, copies from a peer or a
// store through the controller (streamed, resumable, hashed on the way), or
// runs the node's hub download tool. Models are never removed by omission or
// by destroy.
#ifndef FLEET_PROVIDERS_MODEL_MODEL_PROVIDER_H_
#define FLEET_PROVIDERS_MODEL_MODEL_PROVIDER_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "providers/shared/hub_remote.h"
#include "providers/shared/model_location.h"
#include "src/provider.h"
#include "src/settings.h"

namespace fleet {

struct ModelProviderOptions {
  int copy_streams = 2;   // files copied at once between two nodes
  int hash_parallel = 0;  // files hashed at once by a deep verify; <= 0: the node's cores
  // {repo} {revision} {cache} are replaced; empty: DefaultDownloadCommand().
  std::vector<std::string> download_command;
  // A fresh transport to a node, for streams and the lock keeper; default
  // MakeTransport on the node's endpoint.
  std::function<std::unique_ptr<Transport>(const NodeSpec&)> transport_factory;

  // Defaults, overridden by FLEET_MODEL_DOWNLOAD (a command template) and
  // FLEET_MODEL_COPY_STREAMS.
  static ModelProviderOptions FromSettings(const Settings& settings);
};

class ModelProvider : public Provider {
 public:
  ModelProvider() : ModelProvider(ModelProviderOptions::FromSettings(ProcessSettings())) {}
  explicit ModelProvider(ModelProviderOptions options);

  std::string type() const override { return "model"; }
  std::vector<DesiredResource> Expand(const Manifest& m) const override;
  std::string ProbeScript(const DesiredResource& r, const NodeSpec& node) const override;
  ActualResource ParseProbe(const DesiredResource& r, const std::string& output,
                            const NodeFacts& facts) const override;
  PlanChange Diff(const DesiredResource& desired, const ActualResource& actual,
                  const ResourceRecord* record, const DiffContext& ctx) const override;
  // Models are kept by destroy and when no longer declared; with --purge,
  // a revision fleet staged (not one it only found and verified) is removed.
  PlanChange DiffDestroy(const DesiredResource& desired, const ActualResource& actual,
                         const ResourceRecord* record, const DiffContext& ctx) const override;
  PlanChange DiffOrphan(const ResourceRecord& record, const DiffContext& ctx) const override;
  // Revisions carrying fleet's staged mark (staged_mark.h) in the node's
  // cache, or a store probed through it, that neither the state nor the
  // manifests (there) know: named, and removed with --purge. A copy
  // without the mark is never named: fleet did not stage it.
  std::vector<PlanChange> DiffUnrecorded(const std::string& node,
                                         const DiffContext& ctx) const override;
  std::string InventoryScript(const std::string& node, const Manifest& m) const override;
  // A copy found complete (against the source, or with nothing visibly
  // wrong when the hub is the source) whose headers, index (and blobs, with
  // verify: deep) check out on `node`: recorded as apply would, without
  // downloading or writing anything. Refused when the plan would stage or
  // fix anything first.
  Result<nlohmann::json> Adopt(const DesiredResource& desired, const ActualResource& actual,
                               const DiffContext& ctx, const StepContext* node) const override;
  Result<nlohmann::json> Apply(const PlanChange& change, const StepContext& ctx) const override;

 private:
  Result<std::unique_ptr<Transport>> Dedicated(const Manifest& m, const std::string& node) const;
  ModelProviderOptions options_;
};

}  // namespace fleet

#endif  // FLEET_PROVIDERS_MODEL_MODEL_PROVIDER_H_
