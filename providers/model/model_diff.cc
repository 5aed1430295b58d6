#include "providers/model/model_diff.h"

#include <map>

#include "providers/model/hub_sizes.h"
#include "providers/model/model_scope.h"
#include "providers/model/staging_lock.h"
#include "state/state.h"

namespace fleet {

namespace {

using Json = nlohmann::json;

std::string JoinFixes(const std::vector<std::string>& v) {
  std::string s;
  for (const std::string& x : v) s += (s.empty() ? "" : "; ") + x;
  return s;
}

void AddProblems(const std::vector<std::string>& in, std::vector<std::string>* out,
                 size_t max = 10) {
  for (size_t i = 0; i < in.size() && i < max; ++i) out->push_back(in[i]);
  if (in.size() > max) out->push_back("... and " + std::to_string(in.size() - max) + " more");
}

PlanChange WithOp(PlanChange c, ModelStep step, const char* op) {
  step.op = op;
  c.detail = step;
  return c;
}

// The revision a copy is looked at: a floating one's commit once resolved,
// its branch while the download is to resolve it.
std::string RevisionLookedAt(const ModelWant& w) {
  return w.revision.empty() ? w.branch : w.revision;
}

// Said when a store's first node declared on does not answer: the others
// that mount it, and how to go through one that answers.
std::string StoreThroughSilentNode(const ModelDiffInput& in) {
  const std::string& node = in.desired->node;
  const DiffContext& ctx = *in.ctx;
  std::vector<std::string> up, down;
  for (const std::string& name : in.want.store_nodes) {
    if (name == node) continue;
    if (std::find(in.want.store_nodes_off.begin(), in.want.store_nodes_off.end(), name) !=
        in.want.store_nodes_off.end())
      continue;
    bool answers = false;
    if (ctx.all_facts)
      if (auto f = ctx.all_facts->find(name); f != ctx.all_facts->end())
        answers = f->second.reachable;
    (answers ? up : down).push_back(name);
  }
  std::string said = "store " + in.want.location + " is read through " + node +
                     ", the first of its nodes declared on, which does not answer now";
  if (!up.empty())
    said += "; " + CommaList(up) + " also mount" + (up.size() == 1 ? "s" : "") + " it and answer" +
            (up.size() == 1 ? "s" : "") + ": declare " + node +
            " `power: {state: off}` to go through " + up.front();
  else if (!down.empty())
    said += "; " + CommaList(down) + " also mount" + (down.size() == 1 ? "s" : "") + " it but do" +
            (down.size() == 1 ? "es" : "") + " not answer either";
  return said;
}

// "nodes disagree on what main is: ..." when the copies of a floating
// revision probed in this plan name different commits.
std::optional<std::string> BranchDisagreement(const ModelDiffInput& in) {
  std::map<std::string, std::vector<std::string>> by_commit;
  const std::string prefix = "model." + in.desired->name + "@";
  if (in.ctx->all_actual)
    for (const auto& [address, other] : *in.ctx->all_actual) {
      if (address.rfind(prefix, 0) != 0 || !other.probed || !other.error.empty()) continue;
      HubProbe op = HubProbe::FromJson(other.attributes);
      if (op.IsCommit()) by_commit[op.resolved].push_back(address.substr(prefix.size()));
    }
  if (by_commit.size() <= 1) return std::nullopt;
  std::string split;
  for (const auto& [commit_id, where_list] : by_commit)
    split +=
        (split.empty() ? "" : "; ") + ShortRevision(commit_id) + " on " + CommaList(where_list);
  return "nodes disagree on what " + in.want.branch + " is: " + split;
}

// A staging lock whose keeper ran on this node. One from another host (a
// shared store) cannot be judged or ended from here, by the plan or by the
// keeper script.
bool LockTakenHere(const ModelDiffInput& in, const HubProbe& p) {
  const NodeFacts& facts = in.ctx->facts;
  return !facts.hostname.empty() && p.lock && p.lock->host == facts.hostname;
}

// A staging lock taken on this node whose process is gone, or that was
// taken before the node's last boot: its owner can never release it.
bool StaleLockHere(const ModelDiffInput& in, const HubProbe& p) {
  return LockTakenHere(in, p) && (!p.lock->pid_alive || p.lock->boot_id != in.ctx->facts.boot_id);
}

// What the probe shows that every outcome says: layout notes, the store's
// path, a staging lock, a download that seems to run.
std::vector<std::string> ObservedReasons(const ModelDiffInput& in, const ModelAssessment& as) {
  std::vector<std::string> out = as.comp.notes;
  const std::string& node = in.desired->node;
  if (const size_t off = as.where.find("; "); off != std::string::npos)
    out.push_back("store " + in.want.location + " is read through " + node + ": " +
                  as.where.substr(off + 2, as.where.size() - off - 3));
  const HubProbe& p = as.probe;
  if (p.lock) {
    if (StaleLockHere(in, p))
      out.push_back("a stale staging lock (pid " + std::to_string(p.lock->pid) +
                    " is gone): apply takes it over");
    else if (p.lock->controller_gone && LockTakenHere(in, p))
      out.push_back(DescribeLockOwner(*p.lock) +
                    ", whose fleet process is gone: an apply from this controller ends its keeper "
                    "and takes the lock over");
    else
      out.push_back(DescribeLockOwner(*p.lock) +
                    ": apply will not start a duplicate while it runs");
  }
  for (const IncompleteBlob& b : p.incomplete)
    if (p.now > 0 && p.now - b.mtime < 120)
      out.push_back("blobs/" + b.name + " was written " + std::to_string(p.now - b.mtime) +
                    " s ago: a download may be running");
  return out;
}

// Refuses a staging the filesystem cannot hold, with the figures (the
// log's 636 GB onto 251 GB) and a store that fits.
std::string NoSpaceError(const ModelDiffInput& in, const ModelAssessment& as, uint64_t needed,
                         const std::string& sizes_from, const OtherStagings& others) {
  const HubProbe& p = as.probe;
  std::string fits;
  for (const auto& [sname, d] : p.stores)
    if (d.known && d.avail_bytes >= needed)
      fits += (fits.empty() ? "" : ", ") + sname + " (" + HumanBytes(d.avail_bytes) + " free)";
  return in.desired->address + ": needs " + HumanBytes(needed) + sizes_from + others.said + ", " +
         as.where + " has " + HumanBytes(p.disk.avail_bytes) + " free at " + p.disk.path +
         (p.disk.mount.empty() ? "" : " (filesystem " + p.disk.mount + ")") + "; " +
         (fits.empty() ? "no store " + in.desired->node + " mounts has room either"
                       : "a store that fits: " + fits);
}

}  // namespace

ModelDiffInput ModelDiffInputFor(const DesiredResource& desired, const ResourceRecord* record,
                                 const DiffContext& ctx) {
  ModelDiffInput in;
  in.desired = &desired;
  in.ctx = &ctx;
  in.want = desired.attributes.get<ModelWant>();
  in.record = ModelRecordOf(record ? &record->attributes : nullptr);
  in.base = ChangeFor(desired);
  in.step.want = in.want;
  return in;
}

PlanChange Planned(const ModelDiffInput& in, const ModelStep& step) {
  PlanChange c = in.base;
  c.detail = step;
  return c;
}

std::optional<PlanChange> UnsafeBranchName(const ModelDiffInput& in) {
  if (in.want.branch.empty() || IsSafeBranchName(in.want.branch)) return std::nullopt;
  PlanChange c = Planned(in, in.step);
  c.error = in.desired->address + ": revision '" + in.want.branch +
            "' is not a branch name fleet reads as refs/<branch>";
  return c;
}

std::optional<PlanChange> NodeIsOff(const ModelDiffInput& in, const ActualResource& actual) {
  if (actual.probed || in.ctx->facts.reachable) return std::nullopt;
  PlanChange c = Planned(in, in.step);
  c.before = nullptr;
  const ModelWant& w = in.want;
  const std::optional<ModelRecord>& rec = in.record;
  const bool recorded = w.branch.empty()
                            ? IsRecordOf(rec, w)
                            : rec && rec->branch == w.branch && rec->cache == w.cache &&
                                  rec->repo == w.repo && rec->files.has_value();
  if (recorded) {
    c.summary = "node is off: not checked";
    c.reasons.push_back("recorded complete; checked again when the node is up");
    return c;
  }
  c.action = Action::kCreate;
  c.summary = "check and stage after power on";
  c.reasons.push_back("the node is off: what it holds is checked when it is up");
  // The store goes through the first node declared on; say which others
  // could read it, and how to go through one of them.
  if (w.InStore()) c.reasons.push_back(StoreThroughSilentNode(in));
  return WithOp(c, in.step, "ensure");
}

std::optional<PlanChange> ProbeFailed(const ModelDiffInput& in, const ActualResource& actual) {
  if (actual.probed && actual.error.empty()) return std::nullopt;
  PlanChange c = Planned(in, in.step);
  const DesiredResource& d = *in.desired;
  if (!actual.probed)
    c.error = d.address + ": the probe printed nothing for it on " + d.node;
  else
    c.error = d.address + " on " + d.node + ": " + actual.error;
  return c;
}

std::optional<HubProbe> SourceProbe(const ModelDiffInput& in) {
  if (!in.want.FromPeer() || !in.ctx->all_actual) return std::nullopt;
  auto it = in.ctx->all_actual->find(in.want.source_address);
  if (it == in.ctx->all_actual->end() || !it->second.probed || !it->second.error.empty())
    return std::nullopt;
  return HubProbe::FromJson(it->second.attributes);
}

// A node keeps its own commit when it holds it complete (a floating
// revision is not pinned: disagreement is flagged, not corrected); one
// without the branch, or with a commit it does not hold and the source does
// not have, gets the source's commit and refs/<branch> pointed at it.
FloatingRevision ResolveFloating(const ModelDiffInput& in, const HubProbe& p) {
  const ModelWant& w = in.want;
  const std::string& branch = w.branch;
  const std::string where = WhereOf(w, in.desired->node);
  FloatingRevision f;
  f.here = p.IsCommit() ? p.resolved : "";
  std::string src_commit;
  if (std::optional<HubProbe> sp = SourceProbe(in); sp && sp->IsCommit()) src_commit = sp->resolved;
  const bool here_complete =
      !f.here.empty() && p.snapshot && CheckCompleteness(p, nullptr, f.here).complete;
  if (!f.here.empty() && (here_complete || src_commit.empty() || src_commit == f.here)) {
    f.commit = f.here;
  } else if (!src_commit.empty()) {
    f.commit = src_commit;
    f.write_ref = true;
  }
  std::string said = "FLOATING REVISION " + branch + " (allow_floating): ";
  if (!f.here.empty())
    said += "refs/" + branch + " on " + where + " is " + f.here;
  else if (p.resolved.empty())
    said += where + " has no refs/" + branch;
  else
    said += "refs/" + branch + " on " + where + " holds '" + p.resolved.substr(0, 64) +
            "', not a commit id";
  if (!f.commit.empty() && f.commit != f.here)
    said += "; staging " + f.commit + ", what " + branch + " is on " + w.source_name +
            (f.here.empty() ? ""
                            : " (" + ShortRevision(f.here) + " is not complete here, and " +
                                  w.source_name + " has another commit)") +
            ", and pointing refs/" + branch + " at it";
  else if (f.commit.empty() && w.FromHub() && !w.self_source)
    said += "; the download resolves " + branch + " on the hub";
  said += "; every download may bring another commit";
  f.said.push_back(said);
  if (std::optional<std::string> split = BranchDisagreement(in)) f.said.push_back(*split);
  return f;
}

void TakeFloating(const FloatingRevision& f, ModelDiffInput* in, HubProbe* p) {
  if (f.commit != f.here) {  // the probe listed another commit's snapshot, or none
    p->snapshot = false;
    p->entries.clear();
  }
  in->want.revision = f.commit;
  in->step.want.revision = f.commit;  // "": resolved by the download
  in->step.write_ref = f.write_ref;
}

ModelReference ChooseReference(const ModelDiffInput& in, const std::string& rev) {
  ModelReference r;
  if (IsRecordOf(in.record, in.want)) {
    r.files = *in.record->files;
    r.have = r.from_record = !r.files.empty();
    r.from = "the state";
  }
  if (std::optional<HubProbe> sp = SourceProbe(in)) {
    Listing sl = ListingFromProbe(*sp);
    // A floating revision: only the source's listing of the same commit.
    r.source_ok = sp->snapshot && !sl.empty() && (in.want.branch.empty() || sp->resolved == rev);
    if (!r.have && r.source_ok) {
      r.files = std::move(sl);
      r.have = true;
      r.from = in.want.source_name + "'s snapshot";
    }
  }
  return r;
}

ModelAssessment Assess(const ModelDiffInput& in, HubProbe p, std::vector<std::string> said) {
  ModelAssessment as;
  as.rev = RevisionLookedAt(in.want);
  as.where = WhereOf(in.want, in.desired->node);
  as.probe = std::move(p);
  as.ref = ChooseReference(in, as.rev);
  as.comp = CheckCompleteness(as.probe, as.ref.have ? &as.ref.files : nullptr, as.rev);
  as.floating_said = std::move(said);
  const bool legacy = as.probe.layout == "legacy";
  as.deep = in.want.verify == "deep" &&
            (in.want.verify_forced || !as.ref.from_record || in.record->verified != "deep");
  as.total = as.ref.have ? ListingBytes(as.ref.files) : as.comp.present_bytes;
  as.files = as.ref.have ? as.ref.files.size() : as.comp.files_total;
  const std::string dir = HubRepoDirName(in.want.repo);
  if (legacy)
    as.fixes.push_back("link the legacy layout (" + dir + " -> ../" + dir + ", relative)");
  if (!as.comp.absolute_links.empty())
    as.fixes.push_back("make " + std::to_string(as.comp.absolute_links.size()) +
                       " absolute symlink(s) relative");
  if (as.deep)
    as.fixes.push_back("deep verify: hash " + std::to_string(as.files) + " file(s), " +
                       HumanBytes(as.total));
  const bool stale_lock = StaleLockHere(in, as.probe);
  if (stale_lock)
    as.fixes.push_back("remove the stale staging lock of pid " +
                       std::to_string(as.probe.lock->pid));
  as.step = in.step;
  if (stale_lock) as.step.clear_stale_lock = true;
  as.step.legacy = legacy;
  as.step.fix_links = as.comp.absolute_links;
  as.step.want.verify = as.deep ? "deep" : "sizes";
  as.step.expected_bytes = as.ref.have ? as.total : 0;
  return as;
}

PlanChange AssessedChange(const ModelDiffInput& in, const ModelAssessment& as) {
  PlanChange c = Planned(in, as.step);
  ModelHoldings before{as.rev, as.comp.files_ok, as.comp.present_bytes,
                       as.comp.complete && as.ref.have};
  if (as.probe.layout != "hub") before.layout = as.probe.layout;
  if (as.ref.from_record) before.verified = in.record->verified;
  c.before = before;
  c.after = ModelHoldings{
      as.rev, as.files, as.total, true, std::nullopt, as.deep ? "deep" : "headers", in.want.branch};
  c.reasons = as.floating_said;
  for (std::string& r : ObservedReasons(in, as)) c.reasons.push_back(std::move(r));
  return c;
}

std::optional<PlanChange> CompleteAndRecorded(const ModelAssessment& as, PlanChange c) {
  if (!as.comp.complete || !as.ref.have || !as.ref.from_record) return std::nullopt;
  if (as.fixes.empty()) {
    c.summary =
        "complete: " + std::to_string(as.ref.files.size()) + " files, " + HumanBytes(as.total);
    c.reasons = as.floating_said;  // a floating revision is said even when converged
    return c;
  }
  c.action = Action::kUpdate;
  c.summary = JoinFixes(as.fixes);
  return WithOp(c, as.step, "fix");
}

std::optional<PlanChange> CompleteNotRecorded(const ModelAssessment& as, PlanChange c) {
  if (!as.comp.complete || !as.ref.have || as.ref.from_record) return std::nullopt;
  c.action = Action::kUpdate;
  c.summary = "verify and record " + std::to_string(as.ref.files.size()) + " files (" +
              HumanBytes(as.total) + ") already on " + as.where +
              (as.fixes.empty() ? "" : "; " + JoinFixes(as.fixes));
  c.reasons.insert(c.reasons.begin(), "sizes match " + as.ref.from + "; not recorded yet");
  return WithOp(c, as.step, "ensure");
}

PlanChange NoteUnrecorded(const ModelDiffInput& in, PlanChange c) {
  const DiffContext& ctx = *in.ctx;
  if (ctx.recorded == nullptr || ctx.recorded->count(in.desired->address)) return c;
  c.reasons.insert(c.reasons.begin(),
                   "on " + WhereOf(in.want, in.desired->node) +
                       " but not in this state: `fleet state adopt " + in.desired->address +
                       "` verifies and records it without downloading (so does apply)");
  return c;
}

// A non-empty folder with nothing visibly wrong is not proof: apply reads
// every header and the index first.
std::optional<PlanChange> FoundUnverified(const ModelDiffInput& in, const ModelAssessment& as,
                                          PlanChange c) {
  if (!as.comp.complete || as.ref.have) return std::nullopt;
  const ModelWant& w = in.want;
  c.action = Action::kUpdate;
  c.summary = "verify " + std::to_string(as.comp.files_ok) + " files (" +
              HumanBytes(as.comp.present_bytes) + ") found on " + as.where +
              (w.FromHub() && !w.self_source ? ", download what is missing" : "") +
              (as.fixes.empty() ? "" : "; " + JoinFixes(as.fixes));
  c.reasons.insert(c.reasons.begin(),
                   "not verified by fleet yet: apply checks every safetensors header and the "
                   "index before recording it");
  if (w.FromPeer() && !as.ref.source_ok)
    c.reasons.push_back("source " + w.source_name + " has no snapshot of " + ShortRevision(as.rev) +
                        " to compare with");
  return WithOp(c, as.step, "ensure");
}

std::optional<PlanChange> SourceOfItselfIncomplete(const ModelDiffInput& in,
                                                   const ModelAssessment& as, PlanChange c) {
  if (as.comp.complete || !in.want.self_source) return std::nullopt;
  c.error = in.desired->address + ": " + as.where + " is the source of model " + in.desired->name +
            " (source: " + in.want.source + ") but " +
            (as.probe.snapshot ? "is incomplete: " + JoinProblems(as.comp.problems)
                               : "does not hold revision " + as.rev + " in " + in.want.cache) +
            "; stage it there first, or name another source";
  return c;
}

std::optional<PlanChange> NothingToStageFrom(const ModelDiffInput& in, const ModelAssessment& as,
                                             PlanChange c) {
  if (as.comp.complete || !in.want.FromPeer() || as.ref.source_ok || as.ref.have)
    return std::nullopt;
  c.error = in.desired->address + ": nothing to stage from: source " + in.want.source_name +
            " has no snapshot of " + ShortRevision(as.rev) + " (see model." + in.desired->name +
            "@" + in.want.source_name + ")";
  return c;
}

// How a copy staged from a peer node onto a node goes: over the fabric
// between the two, or through the controller. None for other sources.
std::optional<FabricRoute> StageRoute(const ModelDiffInput& in) {
  const ModelWant& w = in.want;
  if (w.source_kind != "node" || w.InStore() || in.ctx->manifest == nullptr ||
      !in.ctx->manifest->nodes.count(in.desired->node))
    return std::nullopt;
  return PlanFabricRoute(in.ctx->manifest, in.ctx->all_facts, w.source_name, in.desired->node,
                         *in.ctx->settings);
}

PlanChange Stage(const ModelDiffInput& in, const ModelAssessment& as, PlanChange c) {
  const Completeness& comp = as.comp;
  const HubProbe& p = as.probe;
  const size_t missing_files =
      comp.files_total > comp.files_ok ? comp.files_total - comp.files_ok : 0;
  c.action = (!p.snapshot && comp.files_ok == 0) ? Action::kCreate : Action::kUpdate;
  if (in.want.FromHub())
    c.summary = "download " + in.want.repo + "@" + ShortRevision(as.rev) + " from the hub on " +
                in.desired->node + (as.ref.have ? " (" + HumanBytes(comp.missing_bytes) + ")" : "");
  else
    c.summary = "stage from " + in.want.source_name + ": " + std::to_string(missing_files) +
                " file(s), " + HumanBytes(comp.missing_bytes);
  ModelStep step = as.step;
  step.route = StageRoute(in);
  if (step.route) {
    c.summary += "; " + step.route->Describe();
    c.copy = step.route->ForPlan("model " + in.desired->name);
  }
  if (!as.fixes.empty()) c.summary += "; " + JoinFixes(as.fixes);
  std::vector<std::string> problems;
  AddProblems(comp.problems, &problems);
  c.reasons.insert(c.reasons.begin(), problems.begin(), problems.end());
  c = WithOp(c, step, "ensure");

  // Space, at plan time, with the figures.
  uint64_t needed = comp.missing_bytes;
  std::string sizes_from;
  std::string unknown = "size unknown until the download lists it";
  bool from_hub = false;
  if (std::optional<SizesFromCopy> s = SizesFromAnotherCopy(in, as)) {
    needed = s->needed;
    sizes_from = s->said;
  } else if (std::optional<SizesFromHub> h = AskTheHub(in, as)) {
    if (!h->error.empty()) {
      c.error = in.desired->address + ": " + h->error;
      return c;
    }
    if (h->unknown.empty()) {
      needed = h->needed;
      sizes_from = h->said;
      from_hub = true;
    } else {
      unknown = h->unknown;
    }
  }
  if (!sizes_from.empty()) c.summary += " (" + HumanBytes(needed) + ")";
  const OtherStagings others = OthersOnTheSameFilesystem(in, as);
  if ((as.ref.have || !sizes_from.empty()) && p.disk.known &&
      needed + others.bytes > p.disk.avail_bytes) {
    c.error = NoSpaceError(in, as, needed, sizes_from, others);
    return c;
  }
  if (!as.ref.have && sizes_from.empty() && p.disk.known)
    c.reasons.push_back(unknown + "; " + HumanBytes(p.disk.avail_bytes) + " free at " +
                        p.disk.path);
  if (from_hub)  // " (sizes from ...)" said as a reason, with the room there is
    c.reasons.push_back(
        sizes_from.substr(2, sizes_from.size() - 3) + ": " + HumanBytes(needed) + " to download" +
        (p.disk.known
             ? ", " + HumanBytes(p.disk.avail_bytes) + " free at " + p.disk.path + others.said
             : ""));
  return c;
}

std::optional<SizesFromCopy> SizesFromAnotherCopy(const ModelDiffInput& in,
                                                  const ModelAssessment& as) {
  if (as.ref.have || !in.ctx->all_actual) return std::nullopt;
  const std::string prefix = "model." + in.desired->name + "@";
  for (const auto& [address, other] : *in.ctx->all_actual) {
    if (address.rfind(prefix, 0) != 0 || address == in.desired->address || !other.probed) continue;
    HubProbe op = HubProbe::FromJson(other.attributes);
    Listing ol = ListingFromProbe(op);
    if (ol.empty() || !CheckCompleteness(op, nullptr, as.rev).complete) continue;
    if (!in.want.branch.empty() && op.resolved != as.rev) continue;  // another commit
    return SizesFromCopy{CheckCompleteness(as.probe, &ol, as.rev).missing_bytes,
                         " (sizes from the copy at " + address.substr(prefix.size()) + ")"};
  }
  return std::nullopt;
}

std::optional<SizesFromHub> AskTheHub(const ModelDiffInput& in, const ModelAssessment& as) {
  const ModelWant& w = in.want;
  if (as.ref.have || !w.FromHub() || w.self_source || in.ctx->hub == nullptr) return std::nullopt;
  HubSizes h = AskHubSizes(in.ctx->hub, w.repo, as.rev);
  SizesFromHub out;
  if (h.files) {
    out.needed = CheckCompleteness(as.probe, &*h.files, as.rev).missing_bytes;
    out.said = " (sizes from the Hub's listing: " + std::to_string(h.files->size()) + " files, " +
               HumanBytes(ListingBytes(*h.files)) + ")";
  } else if (h.unreachable) {
    out.unknown = "size unknown: " + h.error + "; apply asks the Hub again before the download";
  } else {
    out.error = h.error;
  }
  return out;
}

OtherStagings OthersOnTheSameFilesystem(const ModelDiffInput& in, const ModelAssessment& as) {
  OtherStagings o;
  const DiffContext& ctx = *in.ctx;
  const HubProbe& p = as.probe;
  if (!ctx.all_actual || !ctx.manifest || !p.disk.known) return o;
  const Manifest& m = *ctx.manifest;
  for (const auto& [address, other] : *ctx.all_actual) {
    if (address >= in.desired->address) break;
    if (address.rfind("model.", 0) != 0 || !other.probed || !other.error.empty()) continue;
    const size_t at = address.find('@');
    if (at == std::string::npos) continue;
    auto spec = m.models.find(address.substr(6, at - 6));
    if (spec == m.models.end()) continue;
    std::string node = address.substr(at + 1);
    if (auto st = m.stores.find(node); st != m.stores.end()) node = StoreNode(m, st->second);
    if (node != in.desired->node) continue;
    HubProbe op = HubProbe::FromJson(other.attributes);
    if (!op.disk.known || op.disk.mount != p.disk.mount) continue;
    Listing sl;
    const size_t colon = spec->second.source.find(':');
    if (colon == std::string::npos) {  // from the hub: its listing, if it can be asked
      HubSizes h = AskHubSizes(ctx.hub, spec->second.repo, spec->second.revision);
      if (!h.files) continue;
      sl = std::move(*h.files);
    } else {
      const std::string src = address.substr(0, at + 1) + spec->second.source.substr(colon + 1);
      auto sa = ctx.all_actual->find(src);
      if (src == address || sa == ctx.all_actual->end() || !sa->second.probed) continue;
      sl = ListingFromProbe(HubProbe::FromJson(sa->second.attributes));
    }
    if (sl.empty()) continue;
    const uint64_t n = CheckCompleteness(op, &sl, spec->second.revision).missing_bytes;
    if (n == 0) continue;
    o.bytes += n;
    o.said += " + " + HumanBytes(n) + " for " + address;
  }
  if (!o.said.empty()) o.said = " (" + o.said.substr(3) + " in the same plan)";
  return o;
}

}  // namespace fleet
