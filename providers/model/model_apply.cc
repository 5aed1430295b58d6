#include "providers/model/model_apply.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <thread>

#include "providers/model/chain_copy.h"
#include "providers/model/fabric_copy.h"
#include "providers/model/hub_download.h"
#include "providers/model/hub_sizes.h"
#include "providers/model/model_scope.h"
#include "providers/model/progress_meter.h"
#include "providers/model/staged_mark.h"
#include "providers/shared/blob_hash.h"
#include "providers/shared/hub_remote.h"
#include "src/clock.h"
#include "state/state.h"

namespace fleet {

namespace {

using Json = nlohmann::json;

// Polls the bytes under the repo's blobs/ on a node while a download runs
// (the download tool's own progress goes to its log), for ProgressMeter.
class BlobBytesWatcher {
 public:
  BlobBytesWatcher(std::unique_ptr<Transport> t, const HubLocation& loc, ProgressMeter* meter,
                   Clock* clock)
      : t_(std::move(t)), meter_(meter), clock_(clock) {
    const std::string cmd = BlobBytesScript(loc);
    uint64_t start = Read(cmd);
    thread_ = std::thread([this, cmd, start] {
      std::unique_lock<std::mutex> l(mu_);
      while (!stop_) {
        clock_->WaitOn(cv_, l, std::chrono::seconds(3), [&] { return stop_; });
        if (stop_) break;
        l.unlock();
        uint64_t now = Read(cmd);
        if (now >= start) meter_->Set(now - start);
        l.lock();
      }
    });
  }
  ~BlobBytesWatcher() {
    {
      std::lock_guard<std::mutex> l(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

 private:
  uint64_t Read(const std::string& cmd) {
    Result<CommandResult> r = t_->Run(cmd);
    if (!r.ok() || r->exit_code != 0) return 0;
    return std::strtoull(r->out.c_str(), nullptr, 10);
  }
  std::unique_ptr<Transport> t_;
  ProgressMeter* meter_;
  Clock* clock_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

std::string ExpandHome(const std::string& path) {
  if (path.rfind("~/", 0) != 0) return path;
  const char* home = std::getenv("HOME");
  return std::string(home ? home : "") + path.substr(1);
}

// A snapshot path that stays inside the snapshot.
bool SafeSnapshotPath(const std::string& p) {
  return !p.empty() && p[0] != '/' && p != ".." && p.rfind("../", 0) != 0 &&
         p.find("/../") == std::string::npos;
}

// The nodes that see a node's cache or a store (those declared on).
std::vector<std::string> NodesSeeing(const Manifest& m, const std::string& kind,
                                     const std::string& name) {
  std::vector<std::string> n;
  if (kind == "store") {
    if (auto st = m.stores.find(name); st != m.stores.end())
      for (const std::string& x : st->second.nodes)
        if (!DeclaredOff(m, x)) n.push_back(x);
  } else {
    n = {name};
  }
  return n;
}

}  // namespace

Result<Json> RemoveModelRevisionStep(const ModelRemoval& removal, const std::string& node,
                                     const StepContext& ctx, const ModelNodeConnector& connect) {
  const HubLocation loc{removal.cache, removal.repo, removal.revision};
  Result<std::unique_ptr<Transport>> keeper = connect(node);
  if (!keeper.ok()) return keeper.status();
  std::string took;
  Result<std::unique_ptr<StagingLockHolder>> l =
      StagingLockHolder::Acquire(std::move(keeper.value()), loc.cache, loc.repo, &took);
  if (!l.ok()) return Result<Json>::Error(node + ": " + l.status().message());
  uint64_t freed = 0;
  Status s = RemoveModelRevision(ctx.transport, loc, &freed);
  Status r = l.value()->Release(ctx.transport);
  if (!s.ok()) return s;
  if (!r.ok()) return r;
  if (ctx.progress)
    ctx.progress("removed " + loc.repo + "@" + ShortRevision(loc.revision) + ", freed " +
                 HumanBytes(freed));
  return Json();  // no record left
}

Result<ModelCopyPlan> PlanModelCopy(const Listing& reference, const HubProbe& target,
                                    const std::map<std::string, uint64_t>& blobs_here,
                                    const std::string& source_name) {
  std::map<std::string, uint64_t> partial;
  for (const IncompleteBlob& b : target.incomplete)
    partial[b.name.substr(0, b.name.size() - 11)] = b.size;
  ModelCopyPlan plan;
  for (const ListedFile& f : reference) {
    if (!SafeSnapshotPath(f.path))
      return Result<ModelCopyPlan>::Error("source " + source_name +
                                          ": refusing the snapshot path '" + f.path + "'");
    const SnapshotEntry* e = target.Find(f.path);
    if (e && e->resolved && e->size == f.size) continue;
    if (!f.blob.empty()) {
      auto b = blobs_here.find(f.blob);
      if (b != blobs_here.end() && b->second == f.size) {
        // The blob is here already (another revision): link it.
        plan.links.emplace_back(f.path, RelativeBlobLink(f.path, f.blob));
        continue;
      }
    }
    CopyItem item{f.path, f.size, f.blob, 0};
    if (auto it = partial.find(f.blob);
        !f.blob.empty() && it != partial.end() && it->second <= f.size)
      item.offset = it->second;
    plan.bytes += f.size - item.offset;
    plan.items.push_back(std::move(item));
  }
  return plan;
}

std::string NodeSeeingBoth(const Manifest& m, const ModelWant& want, const std::string& location,
                           const std::string& node) {
  const std::vector<std::string> src_seen = NodesSeeing(m, want.source_kind, want.source_name);
  std::string both;
  for (const std::string& n : NodesSeeing(m, want.location_kind, location))
    if (std::find(src_seen.begin(), src_seen.end(), n) != src_seen.end() &&
        (both.empty() || n == node))
      both = n;
  return both;
}

ModelStaging::ModelStaging(ModelStep step, const PlanChange& change, const StepContext& ctx,
                           const ModelProviderOptions& options, ModelNodeConnector connect)
    : step_(std::move(step)),
      change_(change),
      ctx_(ctx),
      options_(options),
      connect_(std::move(connect)),
      record_(ModelRecordOf(ctx.record ? &ctx.record->attributes : nullptr)),
      where_(WhereOf(step_.want, change.node)),
      location_(step_.want.location.empty() ? change.node : step_.want.location),
      t_(ctx.transport),
      loc_{step_.want.cache, step_.want.repo, step_.want.revision} {
  // A floating revision: the plan resolved it to a commit, except for a hub
  // download onto a node without the branch: then the probe resolves it, or
  // the download does.
  unresolved_ = !step_.want.branch.empty() && !IsCommitId(loc_.revision);
  if (unresolved_) loc_.revision = step_.want.branch;
}

ModelStaging::~ModelStaging() { Release(Status::OK()); }

Result<Json> ModelStaging::Run() {
  Status s = ProbeTarget();
  if (s.ok()) s = TakeReference();
  if (s.ok() && Writes()) s = TakeLock();
  if (!s.ok()) return s;
  s = FixLayout();
  if (s.ok() && !comp_.complete) s = StageMissing();
  if (s.ok()) s = VerifyHeaders();
  if (s.ok() && step_.want.verify == "deep") s = DeepVerify();
  if (s.ok() && !step_.want.self_source && RefToWrite()) s = WriteBranchRef();
  const ModelRecord record = Record();
  if (s.ok() && !unresolved_ && record.origin == "staged") s = MarkStaged();
  s = Release(s);
  if (!s.ok()) return s;
  if (unresolved_)
    return Result<Json>::Error(where_ + ": refs/" + step_.want.branch +
                               " names no commit after staging");
  return Json(record);
}

Result<Json> ModelStaging::VerifyInPlace() {
  using R = Result<Json>;
  in_place_ = true;
  Status s = ProbeTarget();
  if (s.ok()) s = TakeReference();
  if (!s.ok()) return s;
  if (unresolved_)
    return R::Error(where_ + ": refs/" + step_.want.branch + " names no commit there");
  if (!comp_.complete)
    return R::Error(where_ + " is incomplete (" + JoinProblems(comp_.problems) +
                    "): apply stages what is missing");
  if (probe_.layout == "legacy" || !comp_.absolute_links.empty() ||
      (!step_.want.self_source && RefToWrite()))
    return R::Error(where_ + ": its layout needs fixing first (legacy folder, absolute links or " +
                    "a branch ref): apply does it");
  s = VerifyHeaders();
  if (s.ok() && step_.want.verify == "deep") s = DeepVerify();
  if (!s.ok()) return s;
  return Json(Record());
}

void ModelStaging::Say(const std::string& line) const {
  if (ctx_.progress) ctx_.progress(line);
}

Status ModelStaging::Release(Status s) {
  if (lock_) {
    Status r = lock_->Release(t_);
    lock_.reset();
    if (s.ok() && !r.ok()) return r;
  }
  return s;
}

Status ModelStaging::ProbeTarget() {
  Result<HubProbe> r = ProbeHub(t_, loc_, unresolved_ ? step_.want.branch : "");
  if (!r.ok()) return r.status();
  if (unresolved_ && r->IsCommit()) {
    loc_.revision = r->resolved;
    unresolved_ = false;
  }
  probe_ = std::move(r.value());
  return Status::OK();
}

Status ModelStaging::Reprobe() {
  Status s = ProbeTarget();
  if (!s.ok()) return s;
  comp_ = CheckCompleteness(probe_, have_ref_ ? &ref_ : nullptr, loc_.revision);
  return Status::OK();
}

// The reference: the source's snapshot as it is now, else the record.
Status ModelStaging::TakeReference() {
  const ModelWant& w = step_.want;
  src_loc_ = HubLocation{w.source_cache, loc_.repo, loc_.revision};
  const bool recorded = IsRecordOf(record_, w);
  if (w.FromPeer()) {
    Result<std::unique_ptr<Transport>> st = connect_(w.source_node);
    if (!st.ok()) return st.status().Prefixed("source " + w.source_name);
    Result<HubProbe> sp = ProbeHub(st->get(), src_loc_);
    if (!sp.ok()) return sp.status().Prefixed("source " + w.source_name);
    src_probe_ = *sp;
    Completeness sc = CheckCompleteness(*sp, nullptr, loc_.revision);
    ref_ = ListingFromProbe(*sp);
    if (!w.branch.empty() && !sp->snapshot &&
        CheckCompleteness(probe_, nullptr, loc_.revision).complete) {
      // A floating revision this node holds at its own commit, which the
      // source no longer has (its branch moved on): the record, if any, is
      // the reference.
      ref_.clear();
      if (recorded) {
        ref_ = *record_->files;
        have_ref_ = !ref_.empty();
      }
    } else if (!sc.complete || ref_.empty()) {
      return Status::Error("source " + w.source_name +
                           " is incomplete: " + JoinProblems(sc.problems));
    } else {
      have_ref_ = true;
    }
  } else if (recorded) {
    ref_ = *record_->files;
    have_ref_ = !ref_.empty();
  }
  comp_ = CheckCompleteness(probe_, have_ref_ ? &ref_ : nullptr, loc_.revision);
  if (!comp_.complete && w.self_source)
    return Status::Error(where_ + ": the source of model " + change_.address +
                         " is incomplete: " + JoinProblems(comp_.problems));
  return Status::OK();
}

// refs/<branch> to point at the commit staged (a floating revision).
bool ModelStaging::RefToWrite() const {
  const std::string& branch = step_.want.branch;
  if (branch.empty() || unresolved_) return false;
  auto it = probe_.refs.find(branch);
  return (it == probe_.refs.end() || step_.write_ref.value_or(false)) &&
         (it == probe_.refs.end() || it->second != loc_.revision);
}

bool ModelStaging::Writes() const {
  const bool self_source = step_.want.self_source;
  return (!comp_.complete && !self_source) || MayDownload() || probe_.layout == "legacy" ||
         !comp_.absolute_links.empty() || (!self_source && RefToWrite()) ||
         (step_.clear_stale_lock.value_or(false) && probe_.lock.has_value());
}

// One writer per model and cache: a second apply reports the first.
Status ModelStaging::TakeLock() {
  Result<std::unique_ptr<Transport>> keeper = connect_(change_.node);
  if (!keeper.ok()) return keeper.status();
  std::string took;
  Result<std::unique_ptr<StagingLockHolder>> l =
      StagingLockHolder::Acquire(std::move(keeper.value()), loc_.cache, loc_.repo, &took);
  if (!l.ok()) return l.status().Prefixed(where_);
  lock_ = std::move(l.value());
  if (!took.empty()) Say("took over a stale staging lock (" + took + ")");
  return Status::OK();
}

Status ModelStaging::FixLayout() {
  bool changed = false;
  if (probe_.layout == "legacy") {
    Status s = FixLegacyLayout(t_, loc_);
    if (!s.ok()) return s;
    Say("legacy layout: linked " + loc_.cache + "/" + HubRepoDirName(loc_.repo) + " -> ../" +
        HubRepoDirName(loc_.repo) + " (relative)");
    changed = true;
  }
  if (!comp_.absolute_links.empty()) {
    Status s = MakeLinksRelative(t_, loc_, comp_.absolute_links);
    if (!s.ok()) return s;
    Say("made " + std::to_string(comp_.absolute_links.size()) + " absolute symlink(s) relative");
    changed = true;
  }
  return changed ? Reprobe() : Status::OK();
}

Status ModelStaging::StageMissing() {
  staged_ = true;
  Status s = unresolved_ ? Status::OK() : MarkStaged();
  if (!s.ok()) return s;
  if (MayDownload()) {
    s = Download();
    downloaded_ = true;
  } else {
    s = CopyFromSource();
  }
  if (s.ok() && !comp_.complete)
    s = Status::Error(where_ + ": still incomplete after " +
                      (downloaded_ ? "the download (it exited 0): " : "staging: ") +
                      JoinProblems(comp_.problems));
  return s;
}

Status ModelStaging::Download() {
  // Someone else's download (not fleet's: the lock was free) still writing?
  for (const IncompleteBlob& b : probe_.incomplete)
    if (probe_.now > 0 && probe_.now - b.mtime < 60)
      return Status::Error(where_ + ": blobs/" + b.name + " was written " +
                           std::to_string(probe_.now - b.mtime) +
                           " s ago by another process: a download seems to be running; not "
                           "starting a duplicate");
  Result<uint64_t> hub_bytes = CheckRoomOnTheHub();
  if (!hub_bytes.ok()) return hub_bytes.status();
  ProgressMeter meter("downloading " + loc_.repo + " on " + change_.node,
                      *hub_bytes ? *hub_bytes : step_.expected_bytes.value_or(0), ctx_.progress,
                      ctx_.clock, 5.0);
  Status s;
  {
    Result<std::unique_ptr<Transport>> wt = connect_(change_.node);
    std::unique_ptr<BlobBytesWatcher> watcher;
    if (wt.ok() && ctx_.progress)
      watcher = std::make_unique<BlobBytesWatcher>(std::move(wt.value()), loc_, &meter, ctx_.clock);
    Say("running `" + DownloadCommandLine(options_.download_command, loc_) + "` on " +
        change_.node);
    HubDownloadEnv env;
    if (ctx_.manifest) env.cli = ctx_.manifest->hub.cli;
    if (ctx_.hub) {
      env.endpoint = ctx_.hub->Endpoint();
      env.token = ctx_.hub->DownloadToken();
    }
    s = RunHubDownload(t_, change_.node, options_.download_command, loc_, env);
  }
  if (!s.ok()) return s;
  Status r = Reprobe();
  if (!r.ok()) return r;
  meter.Set(ListingBytes(ListingFromProbe(probe_)));
  meter.Finish();
  return FixLayout();
}

// Asks the Hub again, just before the download: its listing against what
// the cache holds now and the free space the probe of this apply read. A
// download that cannot fit is refused before any byte moves; one the Hub
// refuses (gated, no such revision) too. The Hub not answering is said, and
// the download goes on. Returns the revision's bytes (0: not known); the
// listing becomes the reference when there was none.
Result<uint64_t> ModelStaging::CheckRoomOnTheHub() {
  const std::string rev = unresolved_ ? step_.want.branch : loc_.revision;
  HubSizes h = AskHubSizes(ctx_.hub, loc_.repo, rev);
  if (!h.files) {
    if (h.unreachable)
      Say("the Hub could not be asked for the size (" + h.error +
          "): downloading without checking the free space first");
    if (!h.error.empty() && !h.unreachable) return Result<uint64_t>::Error(where_ + ": " + h.error);
    return uint64_t{0};
  }
  const uint64_t total = ListingBytes(*h.files);
  const uint64_t needed = CheckCompleteness(probe_, &*h.files, rev).missing_bytes;
  if (probe_.disk.known && needed > probe_.disk.avail_bytes)
    return Result<uint64_t>::Error(change_.address + ": needs " + HumanBytes(needed) +
                                   " (the Hub lists " + std::to_string(h.files->size()) +
                                   " files, " + HumanBytes(total) + "), " + where_ + " has " +
                                   HumanBytes(probe_.disk.avail_bytes) + " free at " +
                                   probe_.disk.path + "; nothing was downloaded");
  // Without a record, the Hub's listing is the reference the download is
  // checked against: a file it did not bring is missing, not unknown.
  if (!have_ref_) {
    ref_ = *h.files;
    have_ref_ = true;
  }
  Say("the Hub lists " + std::to_string(h.files->size()) + " files, " + HumanBytes(total) + "; " +
      HumanBytes(needed) + " to download" +
      (probe_.disk.known ? ", " + HumanBytes(probe_.disk.avail_bytes) + " free" : ""));
  return total;
}

// Runs `script` in the repo folder ($c, $d, $m set; $r the revision).
Status ModelStaging::RunOnRepo(const std::string& script, const std::string& what) {
  Result<CommandResult> r = t_->Run(script);
  if (!r.ok()) return r.status();
  if (r->exit_code != 0) return Status::Error(where_ + ": " + what + ": " + r->err);
  return Status::OK();
}

// Copies what is missing from the source, through this controller.
// When the fabric could make no connection (a link down), what is still
// missing is planned again from a fresh probe (a file whose stream never
// connected got no byte) and copied through the controller.
Status ModelStaging::CopyFromSource() {
  Status s = JoinChain();
  if (!s.ok()) return s;
  s = CopyMissing();
  if (s.ok() || !fabric_unconnected_) return s;
  Status r = Reprobe();
  return r.ok() ? CopyMissing() : r;
}

// A fan-out's chain (change.copy->chain), run by the first of its steps
// for all (ctx.shared), brings every target the files it lacks wholly;
// CopyMissing then copies what is still missing here, on its own.
Status ModelStaging::JoinChain() {
  const std::optional<CopyRoute>& route = change_.copy;
  if (!route || route->chain.size() < 2 || ctx_.shared == nullptr || ctx_.manifest == nullptr ||
      !have_ref_ || location_ != change_.node || step_.want.location_kind != "node")
    return Status::OK();
  const Manifest& m = *ctx_.manifest;
  std::shared_ptr<const ModelChainDelivery> d =
      ctx_.shared->Once<ModelChainDelivery>(route->ChainKey(), [&] {
        return RunModelChain(*route, src_loc_, ref_, m, options_.copy_streams, ctx_.progress,
                             ctx_.clock);
      });
  auto mine = d->targets.find(change_.node);
  if (mine == d->targets.end()) return Reprobe();
  hashed_.insert(mine->second.hashed.begin(), mine->second.hashed.end());
  if (!mine->second.problem.empty())
    Say("the chain did not bring everything here (" + mine->second.problem +
        "): copying the rest on its own");
  return Reprobe();
}

Status ModelStaging::CopyMissing() {
  Result<std::map<std::string, uint64_t>> blobs = ListBlobs(t_, loc_);
  if (!blobs.ok()) return blobs.status();
  Result<ModelCopyPlan> plan = PlanModelCopy(ref_, probe_, *blobs, step_.want.source_name);
  if (!plan.ok()) return plan.status();
  if (probe_.disk.known && plan->bytes > probe_.disk.avail_bytes)
    return Status::Error(where_ + ": needs " + HumanBytes(plan->bytes) + ", has " +
                         HumanBytes(probe_.disk.avail_bytes) + " free at " + probe_.disk.path);
  if (!plan->links.empty()) {
    Status s = RunOnRepo(LinkBlobsScript(loc_, plan->links), "linking blobs");
    if (!s.ok()) return s;
  }
  Status s = CopyItems(*plan);
  if (s.ok()) s = CopySourceRefs();
  return s.ok() ? Reprobe() : s;
}

Result<bool> ModelStaging::FabricStillUsable() {
  if (!step_.route || !step_.route->direct) return false;
  Result<std::unique_ptr<Transport>> source = connect_(step_.want.source_node);
  if (!source.ok()) return source.status();
  Result<std::string> problem = FabricRouteProblem(source->get(), t_, *step_.route);
  if (!problem.ok()) return problem.status();
  if (problem->empty()) return true;
  Say("the fabric is not usable now (" + *problem + "): copying through the controller instead");
  return false;
}

// A node that sees both folders (a store it mounts and its own cache)
// copies on its own: the bytes need not cross the network twice.
Status ModelStaging::CopyItems(const ModelCopyPlan& plan) {
  if (plan.items.empty()) return Status::OK();
  const std::string& src_name = step_.want.source_name;
  const std::string local_node =
      NodeSeeingBoth(*ctx_.manifest, step_.want, location_, change_.node);
  ProgressMeter meter(location_ + " <- " + src_name, plan.bytes, ctx_.progress, ctx_.clock);
  Result<CopyReport> cr = CopyReport();
  if (!local_node.empty()) {
    Say("copying " + std::to_string(plan.items.size()) + " file(s), " + HumanBytes(plan.bytes) +
        " from " + src_name + " on " + local_node + " (it sees both: nothing crosses the network)");
    std::unique_ptr<Transport> own;
    Transport* on = t_;
    if (local_node != change_.node) {
      Result<std::unique_ptr<Transport>> lt = connect_(local_node);
      if (!lt.ok()) return lt.status();
      own = std::move(lt.value());
      on = own.get();
    }
    cr = CopyModelFilesOnNode(on, src_loc_, loc_, plan.items, [&](uint64_t n) { meter.Add(n); });
    if (!cr.ok()) return cr.status();
  } else {
    const size_t streams = std::min<size_t>(
        plan.items.size(), static_cast<size_t>(std::max(1, options_.copy_streams)));
    Say("copying " + std::to_string(plan.items.size()) + " file(s), " + HumanBytes(plan.bytes) +
        " from " + src_name + ", " + std::to_string(streams) + " stream(s) at once");
    CopySide from{[&] { return connect_(step_.want.source_node); }, src_loc_};
    CopySide to{[&] { return connect_(change_.node); }, loc_};
    CopyOptions co;
    co.streams = options_.copy_streams;
    co.clock = ctx_.clock;
    co.on_bytes = [&](uint64_t n) { meter.Add(n); };
    Result<bool> direct = fabric_unconnected_ ? Result<bool>(false) : FabricStillUsable();
    if (!direct.ok()) return direct.status();
    bool unconnected = false;
    cr = *direct ? CopyModelFilesOverFabric(from, to, plan.items, *step_.route, co, &unconnected)
                 : CopyModelFiles(from, to, plan.items, co);
    if (unconnected) {
      fabric_unconnected_ = true;
      Say("no connection over the fabric (" + cr.status().message() + "): copying " +
          step_.route->from + " → " + step_.route->to + " through the controller instead");
    }
    if (!cr.ok()) return cr.status();
    hashed_.insert(cr->hashed.begin(), cr->hashed.end());
  }
  meter.Finish();
  return Status::OK();
}

// The source's refs that name this revision (refs/main for most), where
// the target has none of that name: tools read refs/main.
Status ModelStaging::CopySourceRefs() {
  RefValues refs;
  for (const auto& [ref_name, commit] : src_probe_.refs)
    if (commit == loc_.revision && !probe_.refs.count(ref_name) && ref_name != step_.want.branch)
      refs.emplace_back(ref_name, commit);
  if (refs.empty()) return Status::OK();
  return RunOnRepo(WriteRefsScript(loc_, refs, /*swap=*/false), "writing refs");
}

// Every header, and the index; a hub model that fails is downloaded once.
Status ModelStaging::VerifyHeaders() {
  std::vector<std::string> problems;
  for (int attempt = 0; attempt < 2; ++attempt) {
    Listing present = ListingFromProbe(probe_);
    Result<SnapshotHeaders> h = ReadSnapshotHeaders(t_, loc_);
    if (!h.ok()) return h.status();
    problems = CheckSafetensors(h->headers, h->indexes, present);
    if (present.empty()) problems.push_back("the snapshot has no files");
    if (problems.empty() || !MayDownload() || downloaded_) break;
    Say("verification failed (" + JoinProblems(problems, 3) + "): downloading");
    Status s = Download();
    downloaded_ = staged_ = true;
    if (s.ok() && !comp_.complete)
      s = Status::Error(where_ + ": still incomplete after the download (it exited 0): " +
                        JoinProblems(comp_.problems));
    if (!s.ok()) return s;
  }
  if (problems.empty()) return Status::OK();
  return Status::Error(
      where_ + ": " +
      (downloaded_ ? "the download exited 0 but the model is broken: " : "incomplete: ") +
      JoinProblems(problems));
}

// The files are on this machine: hash them here, `hash_parallel` files at
// a time (<= 0: as many as this machine has cores).
Result<NodeHashReport> ModelStaging::HashHere(const Listing& todo, ProgressMeter* meter) {
  NodeHashReport report;
  report.hasher = "in-process EVP";
  std::vector<LocalHashJob> jobs;
  const std::string base = ExpandHome(loc_.cache) + "/" + HubRepoDirName(loc_.repo) +
                           "/snapshots/" + loc_.revision + "/";
  for (const ListedFile& f : todo) jobs.push_back({base + f.path, f.blob});
  int threads = options_.hash_parallel;
  if (threads <= 0) threads = std::max(1u, std::thread::hardware_concurrency());
  report.files_at_once = std::max(1, std::min<int>(threads, static_cast<int>(jobs.size())));
  std::atomic<uint64_t> done{0};
  for (const LocalHashResult& r : HashLocalFiles(jobs, threads, &done))
    if (!r.ok())
      report.problems.push_back(
          r.path.substr(base.size()) + ": " +
          (r.error.empty() ? "content does not match its blob name (corrupt)" : r.error));
  meter->Set(done);
  return report;
}

namespace {

// "hashed 805 MB in 0.52 s (1548 MB/s, 2 files at once by fleet-probe;
// 0.61 s CPU on the node, 1320 MB per CPU-second)": what a benchmark
// compares with the node's per-core hashing limit. The CPU figure does not
// depend on what else runs on the node's cores; the wall time does.
std::string HashRate(uint64_t bytes, std::chrono::steady_clock::duration took,
                     const NodeHashReport& report) {
  const double s = std::chrono::duration<double>(took).count(), mb = bytes / 1e6;
  const double cpu_seconds = report.cpu_seconds;
  char buf[240];
  int n = snprintf(buf, sizeof buf, "hashed %.0f MB in %.2f s (%.0f MB/s, %d files at once%s%s", mb,
                   s, s > 0 ? mb / s : 0.0, std::max(1, report.files_at_once),
                   report.hasher.empty() ? "" : " by ", report.hasher.c_str());
  if (cpu_seconds > 0)
    snprintf(buf + n, sizeof buf - n, "; %.2f s CPU on the node, %.0f MB per CPU-second)",
             cpu_seconds, mb / cpu_seconds);
  else
    snprintf(buf + n, sizeof buf - n, ")");
  return buf;
}

}  // namespace

Status ModelStaging::DeepVerify() {
  const Listing present = ListingFromProbe(probe_);
  Listing todo;
  uint64_t todo_bytes = 0;
  for (const ListedFile& f : present)
    if (!hashed_.count(f.path)) {
      todo.push_back(f);
      todo_bytes += f.size;
    }
  ProgressMeter meter("deep verify on " + change_.node, todo_bytes, ctx_.progress, ctx_.clock);
  const auto start = ctx_.clock->SteadyNow();
  Result<NodeHashReport> report =
      ctx_.node && ctx_.node->address == "local"
          ? HashHere(todo, &meter)
          : DeepVerifyOnNode(t_, loc_, todo, options_.hash_parallel,
                             [&](const std::string&, uint64_t size) { meter.Add(size); });
  if (!report.ok()) return report.status();
  meter.Finish();
  if (!report->problems.empty())
    return Status::Error(where_ + ": deep verify: " + JoinProblems(report->problems));
  Say("deep verify: " + std::to_string(present.size()) + " file(s) match their blob names (" +
      std::to_string(hashed_.size()) + " hashed while copied); " +
      HashRate(todo_bytes, ctx_.clock->SteadyNow() - start, *report));
  return Status::OK();
}

// Tools read the branch: point it at the commit just verified.
Status ModelStaging::WriteBranchRef() {
  const std::string& branch = step_.want.branch;
  Status s = RunOnRepo(WriteRefsScript(loc_, {{branch, loc_.revision}}, /*swap=*/true),
                       "writing refs/" + branch);
  if (s.ok()) Say("refs/" + branch + " -> " + loc_.revision);
  return s;
}

Status ModelStaging::MarkStaged() {
  return RunOnRepo(WriteStagedMarkScript(loc_), "marking the copy as staged by fleet");
}

ModelRecord ModelStaging::Record() const {
  const Listing present = ListingFromProbe(probe_);
  const bool recorded = IsRecordOf(record_, step_.want);
  ModelRecord out;
  out.repo = loc_.repo;
  out.revision = loc_.revision;
  out.cache = loc_.cache;
  out.location = step_.want.location;
  out.source = step_.want.source;
  out.files = present;
  out.bytes = ListingBytes(present);
  out.verified = "headers";
  out.verified_at = NowRfc3339();
  // What --purge may remove: files fleet put there, not a copy it only
  // found and checked (a source, an operator's download).
  // A copy found with fleet's mark (a lost record; `fleet state adopt`)
  // was fleet's before.
  out.origin = staged_ || probe_.staged_mark          ? "staged"
               : recorded && !record_->origin.empty() ? record_->origin
                                                      : "adopted";
  out.branch = step_.want.branch;
  const bool same_files = recorded && record_->files->size() == present.size() &&
                          ListingToJson(*record_->files) == ListingToJson(present);
  if (step_.want.verify == "deep") {
    out.verified = "deep";
    out.deep_verified_at = out.verified_at;
  } else if (same_files && record_->verified == "deep") {
    out.verified = "deep";
    out.deep_verified_at = record_->deep_verified_at;
  }
  return out;
}

}  // namespace fleet
