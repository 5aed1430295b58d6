// The steps ModelProvider::Apply takes for one model copy, one function
// each, in the order Run() takes them: probe the target, take the
// reference (the source's snapshot as it is now, else the record), take the
// staging lock when anything is to be written, fix the layout, stage what
// is missing (a hub download, or a copy from the source), check every
// safetensors header and the index, deep verify, point a floating
// revision's refs/<branch> at the commit; then the record.
//
// Removing a revision (--purge) is RemoveModelRevisionStep.
#ifndef FLEET_PROVIDERS_MODEL_MODEL_APPLY_H_
#define FLEET_PROVIDERS_MODEL_MODEL_APPLY_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "providers/model/model_attrs.h"
#include "providers/model/model_copy.h"
#include "providers/model/model_provider.h"
#include "providers/model/progress_meter.h"
#include "providers/model/repo_writes.h"
#include "providers/model/staging_lock.h"
#include "providers/shared/completeness.h"
#include "providers/shared/hub_cache.h"
#include "providers/shared/hub_remote.h"
#include "src/provider.h"

namespace fleet {

// A fresh, connected transport to a node of the manifests.
using ModelNodeConnector = std::function<Result<std::unique_ptr<Transport>>(const std::string&)>;

// --purge: removes one revision fleet staged, under the staging lock so
// that no copy is half-way. Returns null (no record left).
Result<nlohmann::json> RemoveModelRevisionStep(const ModelRemoval& removal, const std::string& node,
                                               const StepContext& ctx,
                                               const ModelNodeConnector& connect);

// What to copy from the source: the files missing here, resumed from a
// partial blob; a script that links blobs already here (another revision
// holds them); refuses a snapshot path that leaves the snapshot.
struct ModelCopyPlan {
  std::vector<CopyItem> items;
  BlobLinks links;     // to link in the snapshot (LinkBlobsScript)
  uint64_t bytes = 0;  // to transfer
};
Result<ModelCopyPlan> PlanModelCopy(const Listing& reference, const HubProbe& target,
                                    const std::map<std::string, uint64_t>& blobs_here,
                                    const std::string& source_name);

// The node that sees both the source and the target folder (a store it
// mounts and its own cache), preferring `node`; "" if none does.
std::string NodeSeeingBoth(const Manifest& m, const ModelWant& want, const std::string& location,
                           const std::string& node);

// One apply of an ensure/fix change of a model copy.
class ModelStaging {
 public:
  ModelStaging(ModelStep step, const PlanChange& change, const StepContext& ctx,
               const ModelProviderOptions& options, ModelNodeConnector connect);
  ~ModelStaging();

  // All the steps; the record to keep.
  Result<nlohmann::json> Run();
  // `fleet state adopt`: Run's checks (completeness against the reference,
  // every safetensors header and the index, a deep verify when declared)
  // on what is there, writing and downloading nothing: an error when
  // anything is missing or its layout needs fixing. The record to keep.
  Result<nlohmann::json> VerifyInPlace();

  // The steps, in order (each returns its error, the lock is released by Run).
  Status ProbeTarget();
  Status TakeReference();
  bool Writes() const;  // anything to write: take the lock
  Status TakeLock();
  Status FixLayout();
  Status StageMissing();
  Status VerifyHeaders();
  Status DeepVerify();
  Status WriteBranchRef();
  // Marks the revision as fleet's (staged_mark.h): before this apply writes
  // it, so that even a copy whose record is never saved stays fleet's, and
  // again once it is known (a floating revision the download resolved).
  Status MarkStaged();
  ModelRecord Record() const;

 private:
  Status Reprobe();
  Status Download();
  Result<uint64_t> CheckRoomOnTheHub();
  Status CopyFromSource();
  Status JoinChain();
  Status CopyMissing();
  Status CopyItems(const ModelCopyPlan& plan);
  // Whether the plan's direct fabric route is still usable now (said when
  // not: the copy goes through the controller then).
  Result<bool> FabricStillUsable();
  Status CopySourceRefs();
  Result<NodeHashReport> HashHere(const Listing& todo, ProgressMeter* meter);
  Status RunOnRepo(const std::string& script, const std::string& what);
  bool RefToWrite() const;
  bool MayDownload() const { return step_.want.FromHub() && !step_.want.self_source && !in_place_; }
  Status Release(Status s);
  void Say(const std::string& line) const;

  const ModelStep step_;
  const PlanChange& change_;
  const StepContext& ctx_;
  const ModelProviderOptions& options_;
  const ModelNodeConnector connect_;
  const std::optional<ModelRecord> record_;
  const std::string where_;     // WhereOf
  const std::string location_;  // the node or store the copy is in
  Transport* const t_;
  HubLocation loc_;
  bool unresolved_ = false;  // a floating revision the download resolves
  HubLocation src_loc_;
  HubProbe probe_;
  HubProbe src_probe_;
  Listing ref_;
  bool have_ref_ = false;
  Completeness comp_;
  std::unique_ptr<StagingLockHolder> lock_;
  bool downloaded_ = false;
  bool staged_ = false;           // this apply wrote files (not only checked them)
  bool in_place_ = false;         // VerifyInPlace: write nothing
  std::set<std::string> hashed_;  // paths hashed while copied
  // No connection could be made over the fabric: the rest goes through
  // the controller.
  bool fabric_unconnected_ = false;
};

}  // namespace fleet

#endif  // FLEET_PROVIDERS_MODEL_MODEL_APPLY_H_
