// The decisions ModelProvider::Diff takes, one function each, in the order
// Diff asks them: a branch name it cannot read, a node that is off, a probe
// that failed; then, with the probe read against the reference file list,
// a copy that is complete (recorded or not), found but unverified, a source
// that is itself incomplete, nothing to stage from, and else the staging
// (refused at plan time when the space is not there).
//
// Each decision returns the change when it applies and nothing otherwise,
// so that Diff reads as `if (auto c = NodeIsOff(in, actual)) return *c;`.
#ifndef FLEET_PROVIDERS_MODEL_MODEL_DIFF_H_
#define FLEET_PROVIDERS_MODEL_MODEL_DIFF_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "providers/model/model_attrs.h"
#include "providers/shared/completeness.h"
#include "providers/shared/hub_cache.h"
#include "src/provider.h"

namespace fleet {

// What every decision reads.
struct ModelDiffInput {
  const DesiredResource* desired = nullptr;
  const DiffContext* ctx = nullptr;
  ModelWant want;  // for a floating revision, `revision` becomes the commit resolved
  std::optional<ModelRecord> record;
  PlanChange base;  // ChangeFor(desired), before any decision
  ModelStep step;   // what apply is told so far
};
ModelDiffInput ModelDiffInputFor(const DesiredResource& desired, const ResourceRecord* record,
                                 const DiffContext& ctx);

// The base change with `step` as its detail.
PlanChange Planned(const ModelDiffInput& in, const ModelStep& step);

// A floating revision whose branch fleet cannot read as refs/<branch>.
std::optional<PlanChange> UnsafeBranchName(const ModelDiffInput& in);
// The node does not answer: kept as recorded, or checked after power on.
std::optional<PlanChange> NodeIsOff(const ModelDiffInput& in, const ActualResource& actual);
// The probe printed nothing for it, or an error.
std::optional<PlanChange> ProbeFailed(const ModelDiffInput& in, const ActualResource& actual);

// What the source (a peer node or store, not this copy) holds, as probed
// in this plan; nothing when it was not read.
std::optional<HubProbe> SourceProbe(const ModelDiffInput& in);

// A floating revision on this copy: the commit it is to hold, and what the
// plan says about it.
struct FloatingRevision {
  std::string here;    // the commit refs/<branch> names here; "" if none
  std::string commit;  // the commit to hold; "": the download resolves it
  bool write_ref = false;
  std::vector<std::string> said;  // FLOATING REVISION ..., nodes disagree ...
};
FloatingRevision ResolveFloating(const ModelDiffInput& in, const HubProbe& p);
// Takes the resolved commit: into the want and the step, and out of the
// probe when it listed another commit's snapshot.
void TakeFloating(const FloatingRevision& f, ModelDiffInput* in, HubProbe* p);

// The file list this copy is to hold: the verified record, else the source
// as probed now.
struct ModelReference {
  Listing files;
  bool have = false;
  bool from_record = false;
  std::string from;        // "the state", "<source>'s snapshot"
  bool source_ok = false;  // the source has a snapshot of the revision
};
ModelReference ChooseReference(const ModelDiffInput& in, const std::string& rev);

// The probe read against the reference, and what apply would fix.
struct ModelAssessment {
  std::string rev;    // the revision looked at (a floating one's branch if unresolved)
  std::string where;  // WhereOf
  HubProbe probe;
  ModelReference ref;
  Completeness comp;
  bool deep = false;                       // apply hashes every blob
  uint64_t total = 0;                      // bytes the copy is to hold
  size_t files = 0;                        // files the copy is to hold
  std::vector<std::string> fixes;          // layout and verify work on what is there
  std::vector<std::string> floating_said;  // said even when converged
  ModelStep step;                          // with legacy, fix_links, verify, expected_bytes
};
ModelAssessment Assess(const ModelDiffInput& in, HubProbe p, std::vector<std::string> said);

// The change with before, after, detail and the reasons every outcome
// shares (layout notes, the store's path, a staging lock, a download that
// seems to run).
PlanChange AssessedChange(const ModelDiffInput& in, const ModelAssessment& as);

// Complete against the record: nothing to do, or only the fixes.
std::optional<PlanChange> CompleteAndRecorded(const ModelAssessment& as, PlanChange c);
// Complete against the source: verify and record.
std::optional<PlanChange> CompleteNotRecorded(const ModelAssessment& as, PlanChange c);
// A copy to verify that this state has no record of at all (a lost state
// file): says that `fleet state adopt` records it without downloading.
PlanChange NoteUnrecorded(const ModelDiffInput& in, PlanChange c);
// Something is there with nothing visibly wrong, and no reference.
std::optional<PlanChange> FoundUnverified(const ModelDiffInput& in, const ModelAssessment& as,
                                          PlanChange c);
// This copy is the source and it is incomplete.
std::optional<PlanChange> SourceOfItselfIncomplete(const ModelDiffInput& in,
                                                   const ModelAssessment& as, PlanChange c);
// The source has no snapshot of the revision, and nothing else lists it.
std::optional<PlanChange> NothingToStageFrom(const ModelDiffInput& in, const ModelAssessment& as,
                                             PlanChange c);
// Download or copy what is missing, or refuse for want of space.
PlanChange Stage(const ModelDiffInput& in, const ModelAssessment& as, PlanChange c);

// The bytes a hub download brings, from another complete copy of the same
// revision probed in this plan (a download has no listing before it runs).
struct SizesFromCopy {
  uint64_t needed = 0;
  std::string said;  // " (sizes from the copy at <where>)"
};
std::optional<SizesFromCopy> SizesFromAnotherCopy(const ModelDiffInput& in,
                                                  const ModelAssessment& as);
// The bytes a hub download brings, from the Hub's own listing of the
// revision (asked from the controller; ctx.hub). Nothing when it does not
// apply (a reference is known, not from the hub, no Hub to ask).
struct SizesFromHub {
  uint64_t needed = 0;
  std::string said;     // " (sizes from the Hub's listing: N files, X)"
  std::string unknown;  // the Hub could not be asked: what the plan says instead
  std::string error;    // the Hub's refusal (gated without a token, no such revision)
};
std::optional<SizesFromHub> AskTheHub(const ModelDiffInput& in, const ModelAssessment& as);
// Other models this plan stages onto the same filesystem of this node
// (those whose address sorts first): their share of the free space.
struct OtherStagings {
  uint64_t bytes = 0;
  std::string said;  // " (X for model.a@n + Y for ... in the same plan)"
};
OtherStagings OthersOnTheSameFilesystem(const ModelDiffInput& in, const ModelAssessment& as);

}  // namespace fleet

#endif  // FLEET_PROVIDERS_MODEL_MODEL_DIFF_H_
