#include "providers/model/chain_copy.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <mutex>
#include <thread>

#include "providers/model/fabric_copy.h"
#include "providers/model/model_apply.h"
#include "providers/model/model_copy.h"
#include "providers/shared/fabric_chain.h"
#include "providers/shared/fabric_route.h"
#include "src/provider.h"
#include "src/shell_quote.h"

namespace fleet {

using namespace model_copy_internal;

namespace model_chain {

using Target = ModelChainDelivery::Target;
using Progress = std::function<void(const std::string&)>;

struct Member {
  std::string node, address;
  HubLocation loc;
  std::map<std::string, CopyItem> fresh;  // path -> a file it lacks wholly
};

// What `hop` lacks wholly (a partial file is its own step's to resume), or
// why the chain cannot write there.
Result<Member> Needs(const CopyRoute::Hop& hop, const CopyRoute& route, const HubLocation& src,
                     const Listing& reference, const Manifest& m) {
  using R = Result<Member>;
  Result<std::unique_ptr<Transport>> t = ConnectNode(m, hop.node);
  if (!t.ok()) return t.status();
  Member member{hop.node, hop.address, {m.nodes.at(hop.node).hf_cache, src.repo, src.revision}, {}};
  Result<HubProbe> probe = ProbeHub(t->get(), member.loc);
  if (!probe.ok()) return probe.status();
  if (probe->layout == "legacy") return R::Error("a legacy cache layout: its step fixes it first");
  Result<std::map<std::string, uint64_t>> blobs = ListBlobs(t->get(), member.loc);
  if (!blobs.ok()) return blobs.status();
  Result<ModelCopyPlan> plan = PlanModelCopy(reference, *probe, *blobs, route.from);
  if (!plan.ok()) return plan.status();
  for (const CopyItem& item : plan->items)
    if (item.offset == 0) member.fresh[item.path] = item;
  Result<std::string> problem = FabricAddressProblem(t->get(), hop.node, hop.address);
  if (!problem.ok()) return problem.status();
  if (!problem->empty()) return R::Error(*problem);
  return member;
}

// One lane: a connection to the source and to every member, for one file
// at a time.
struct Lane {
  std::unique_ptr<Transport> source;
  std::map<std::string, std::unique_ptr<Transport>> hops;
};

class ChainRun {
 public:
  ChainRun(std::vector<Member> members, const HubLocation& src, const Manifest& m,
           const Progress& progress, Clock* clock, ModelChainDelivery* d)
      : members_(std::move(members)), src_(src), m_(m), progress_(progress), clock_(clock), d_(d) {}

  void Run(const CopyRoute& route, const Listing& reference, int streams) {
    for (const ListedFile& f : reference)
      if (std::any_of(members_.begin(), members_.end(),
                      [&](const Member& x) { return x.fresh.count(f.path); }))
        files_.push_back(f);
    std::stable_sort(files_.begin(), files_.end(),
                     [](const ListedFile& a, const ListedFile& b) { return a.size > b.size; });
    const int lanes = std::max(1, std::min<int>(streams, static_cast<int>(files_.size())));
    d_->streams = files_.empty() ? 0 : lanes;
    std::vector<std::thread> threads;
    for (int k = 0; k < lanes && !files_.empty(); ++k)
      threads.emplace_back([this, &route] { RunLane(route); });
    for (std::thread& t : threads) t.join();
  }

 private:
  Status Open(const CopyRoute& route, Lane* lane) {
    Result<std::unique_ptr<Transport>> s = ConnectNode(m_, route.from);
    if (!s.ok()) return s.status();
    lane->source = std::move(s.value());
    std::vector<Result<std::unique_ptr<Transport>>> ts;
    for (size_t k = 0; k < members_.size(); ++k) ts.emplace_back(Status::Error("not connected"));
    std::vector<std::thread> connects;  // at once: each is an SSH handshake
    for (size_t k = 0; k < members_.size(); ++k)
      connects.emplace_back([&, k] { ts[k] = ConnectNode(m_, members_[k].node); });
    for (std::thread& t : connects) t.join();
    for (size_t k = 0; k < members_.size(); ++k) {
      if (!ts[k].ok())
        Lose(members_[k].node, ts[k].status().message());
      else
        lane->hops[members_[k].node] = std::move(ts[k].value());
    }
    return Status::OK();
  }

  void RunLane(const CopyRoute& route) {
    Lane lane;
    Status s = Open(route, &lane);
    if (!s.ok()) return Fail("", "the source: " + s.message());
    for (size_t i = next_++; i < files_.size(); i = next_++) CopyFile(files_[i], &lane);
  }

  void CopyFile(const ListedFile& f, Lane* lane);
  void Finish(const ListedFile& f, const Member& x, const FabricHopResult& hop, Lane* lane);

  void Lose(const std::string& node, const std::string& why) {
    std::lock_guard<std::mutex> lock(mu_);
    Target& t = d_->targets[node];
    if (!t.lost) t.problem = node + " was lost mid-transfer (" + why + ")";
    t.lost = true;
  }
  void Fail(const std::string& node, const std::string& why) {
    std::lock_guard<std::mutex> lock(mu_);
    for (const Member& x : members_) {
      Target& t = d_->targets[x.node];
      if ((node.empty() || node == x.node) && t.problem.empty()) t.problem = why;
    }
  }
  bool Lost(const std::string& node) {
    std::lock_guard<std::mutex> lock(mu_);
    return d_->targets[node].lost;
  }

  std::vector<Member> members_;
  const HubLocation src_;
  const Manifest& m_;
  const Progress& progress_;
  Clock* clock_;
  ModelChainDelivery* d_;
  std::vector<ListedFile> files_;
  std::atomic<size_t> next_{0};
  std::mutex mu_;
};

// One file through the hops that lack it and are not lost, each hop hashing
// what it writes as it arrives; then, at once on every hop, the check of
// that hash against the blob name and the rename.
void ChainRun::CopyFile(const ListedFile& f, Lane* lane) {
  FabricChainSpec spec;
  spec.clock = clock_;
  spec.source = lane->source.get();
  spec.source_cmd = RepoPrelude(src_) + "exec cat -- \"$m/snapshots/$r/\"" + ShellQuote(f.path);
  std::vector<const Member*> hops;
  for (const Member& x : members_) {
    if (!x.fresh.count(f.path) || !lane->hops.count(x.node) || Lost(x.node)) continue;
    const Paths p = TargetPaths(x.fresh.at(f.path));
    spec.hops.push_back({x.node, lane->hops.at(x.node).get(),
                         TargetPrelude(x.loc) + HashingWriterCommand(p, x.fresh.at(f.path)),
                         x.address});
    hops.push_back(&x);
  }
  if (hops.empty()) return;
  FabricChainResult r = FabricChain(spec);
  std::vector<std::thread> finishes;
  for (size_t k = 0; k < hops.size(); ++k)
    finishes.emplace_back([&, k] { Finish(f, *hops[k], r.hops[k], lane); });
  for (std::thread& t : finishes) t.join();
}

void ChainRun::Finish(const ListedFile& f, const Member& x, const FabricHopResult& hop,
                      Lane* lane) {
  if (!hop.target.ok()) return Lose(x.node, hop.Problem());
  if (!hop.delivered()) return Fail(x.node, f.path + " over the chain: " + hop.Problem());
  const CopyItem& item = x.fresh.at(f.path);
  const Paths p = TargetPaths(item);
  const std::string mismatch = StreamHashProblem(hop.target->out, item);
  Result<CommandResult> fin = lane->hops.at(x.node)->Run(
      TargetPrelude(x.loc) + (mismatch.empty() ? FinishScript(p, item) : "rm -f -- " + p.inc));
  if (!fin.ok()) return Lose(x.node, fin.status().message());
  if (!mismatch.empty())
    return Fail(x.node, f.path + ": " + mismatch + "; the partial file is removed");
  if (fin->exit_code != 0) return Fail(x.node, f.path + ": " + fin->err);
  std::lock_guard<std::mutex> lock(mu_);
  Target& t = d_->targets[x.node];
  t.bytes += f.size;
  if (!item.blob.empty()) t.hashed.insert(f.path);
}

// The hops that lack files wholly and can take them, checked at once; why
// not for the others.
std::vector<Member> Hops(const CopyRoute& route, const HubLocation& src, const Listing& reference,
                         const Manifest& m, Transport* source, ModelChainDelivery* d) {
  const size_t n = route.chain.size();
  std::vector<Result<Member>> found(n, Result<Member>::Error("not checked"));
  std::vector<std::thread> checks;
  for (size_t k = 0; k < n; ++k)
    checks.emplace_back([&, k] { found[k] = Needs(route.chain[k], route, src, reference, m); });
  for (std::thread& t : checks) t.join();
  std::vector<std::string> addresses;
  for (const Result<Member>& x : found)
    if (x.ok()) addresses.push_back(x->address);
  Result<std::set<std::string>> unrouted = UnroutedAddresses(source, addresses);
  std::vector<Member> members;
  for (size_t k = 0; k < n; ++k) {
    std::string& problem = d->targets[route.chain[k].node].problem;
    if (!found[k].ok())
      problem = "not in the chain: " + found[k].status().message();
    else if (!unrouted.ok())
      problem = "not in the chain: " + unrouted.status().message();
    else if (unrouted->count(found[k]->address))
      problem = "not in the chain: " + route.from + " has no route to " + found[k]->address;
    else if (!found[k]->fresh.empty())
      members.push_back(std::move(found[k].value()));
  }
  return members;
}

std::string RouteOf(const CopyRoute& route, const std::vector<Member>& members) {
  std::string line = route.from;
  for (const Member& x : members) line += " \u2192 " + x.node;
  return line;
}

ModelChainDelivery Run(const CopyRoute& route, const HubLocation& src, const Listing& reference,
                       const Manifest& m, int streams, const Progress& progress, Clock* clock) {
  ModelChainDelivery d;
  Result<std::unique_ptr<Transport>> source = ConnectNode(m, route.from);
  if (!source.ok()) {
    for (const CopyRoute::Hop& hop : route.chain)
      d.targets[hop.node].problem = source.status().message();
    return d;
  }
  std::vector<Member> members = Hops(route, src, reference, m, source->get(), &d);
  if (members.empty()) return d;
  const auto start = clock->SteadyNow();
  const std::string line = RouteOf(route, members);
  if (progress)
    progress("copying " + src.repo + " " + line + " over the fabric, one chain per file, " +
             std::to_string(streams) + " at once: each hop writes and forwards as it receives");
  ChainRun(std::move(members), src, m, progress, clock, &d).Run(route, reference, streams);
  if (progress) {
    char took[96];
    snprintf(took, sizeof took, "%.1f s, %d stream(s)",
             std::chrono::duration<double>(clock->SteadyNow() - start).count(), d.streams);
    std::string lost;
    for (const auto& [node, t] : d.targets)
      if (t.lost) lost += (lost.empty() ? "" : ", ") + node;
    progress("chain " + line + ": " + took + (lost.empty() ? "" : "; lost: " + lost));
  }
  return d;
}

}  // namespace model_chain

ModelChainDelivery RunModelChain(const CopyRoute& route, const HubLocation& src,
                                 const Listing& reference, const Manifest& m, int streams,
                                 const std::function<void(const std::string&)>& progress,
                                 Clock* clock) {
  return model_chain::Run(route, src, reference, m, streams, progress, clock);
}

}  // namespace fleet
