#include "src/engine/executor.h"

#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

namespace fleet {

namespace {

enum class StepState { kPending, kRunning, kDone, kFailed, kSkipped, kUndone };

const char* Verb(Action a) {
  switch (a) {
    case Action::kCreate:
      return "Creating";
    case Action::kUpdate:
      return "Modifying";
    case Action::kReplace:
      return "Replacing";
    case Action::kDelete:
      return "Destroying";
    default:
      return "Checking";
  }
}

std::string Seconds(Clock* clock, std::chrono::steady_clock::time_point since) {
  double s = std::chrono::duration<double>(clock->SteadyNow() - since).count();
  char buf[32];
  snprintf(buf, sizeof buf, "%.1fs", s);
  return buf;
}

}  // namespace

Executor::Executor(const Manifest* manifest,
                   const std::vector<std::unique_ptr<Provider>>* providers,
                   NodeConnections* connections, StateStore* store, PowerSwitch* power,
                   std::function<void(const std::string&)> log)
    : deps_{manifest, providers, connections, store, power, std::move(log), nullptr, {}},
      own_hub_(MakeHubApiFor(*manifest)) {
  deps_.hub = own_hub_.get();
}

// One Apply call: the plan's steps as a graph, their states, and what the
// walk has done so far. Every member is guarded by mu_ once workers start.
class ApplyRun {
 public:
  ApplyRun(const Executor::Deps& deps, const Plan& plan, State* state)
      : deps_(deps), state_(state) {
    BuildGraph(plan);
  }

  // Runs every step, up to `parallelism` at once, one per node at a time.
  void Walk(int parallelism) {
    std::vector<std::thread> threads;
    int workers = std::max(1, std::min<int>(parallelism, static_cast<int>(steps_.size())));
    for (int w = 0; w < workers; ++w) threads.emplace_back([this] { Worker(); });
    for (auto& t : threads) t.join();
  }

  // Undoes, newest first, the done steps a failed step needed that nothing
  // done still needs. REQUIRES: Walk returned.
  void Rollback() {
    // A node that went dark may answer again by now: it gets one more try.
    // Should that undo step not reach it either, its other undo steps fail
    // at once (each would wait out its own connect timeout).
    dark_nodes_.clear();
    std::set<size_t> unit = FailedUnit();
    for (auto it = completion_order_.rbegin(); it != completion_order_.rend(); ++it)
      if (unit.count(*it) && !StillNeeded(*it)) UndoStep(*it);
  }

  ApplyReport& report() { return report_; }

 private:
  void BuildGraph(const Plan& plan) {
    std::map<std::string, size_t> index;
    for (const PlanChange& c : plan.changes) {
      if (c.action == Action::kNoop) continue;
      index[c.address] = steps_.size();
      steps_.push_back(&c);
    }
    const size_t n = steps_.size();
    deps_of_.resize(n);
    dependents_.resize(n);
    for (size_t i = 0; i < n; ++i)
      for (const std::string& d : steps_[i]->depends_on)
        if (auto it = index.find(d); it != index.end()) {
          deps_of_[i].push_back(it->second);
          dependents_[it->second].push_back(i);
        }
    st_.assign(n, StepState::kPending);
    applied_.resize(n);
    prior_.resize(n);
    for (size_t i = 0; i < n; ++i)
      if (const ResourceRecord* r = state_->Find(steps_[i]->address)) prior_[i] = *r;
    pending_ = n;
  }

  const Provider* ProviderFor(const std::string& type) const {
    for (const auto& p : *deps_.providers)
      if (p->type() == type) return p.get();
    return nullptr;
  }

  // REQUIRES: mu_ held.
  Status Save() {
    if (!serial_bumped_) {
      ++state_->serial;
      serial_bumped_ = true;
    }
    Status saved = deps_.store->Save(*state_);
    if (!saved.ok()) state_unwritable_ = true;
    return saved;
  }

  // A save failed: nothing more starts, since what it did could not be
  // recorded (the next plan re-probes what the finished steps did).
  // REQUIRES: mu_ held.
  void StopPending() {
    for (size_t i = 0; i < steps_.size(); ++i) {
      if (st_[i] != StepState::kPending) continue;
      st_[i] = StepState::kSkipped;
      --pending_;
      report_.skipped.push_back(steps_[i]->address);
      deps_.log(steps_[i]->address + ": not started (the state cannot be written; apply stops)");
    }
    cv_.notify_all();
  }

  static ResourceRecord RecordOf(const PlanChange& c, const nlohmann::json& attrs) {
    ResourceRecord r;
    r.address = c.address;
    r.type = c.type;
    r.node = c.node;
    r.attributes = attrs;
    r.updated_at = NowRfc3339();
    return r;
  }

  static bool IsForget(const PlanChange& c) { return c.detail.value("forget", false); }
  // The node-itself type's steps (power) reach the node themselves; every
  // other step needs it up.
  bool ReachesNodeItself(const PlanChange& c) const {
    const Provider* p = ProviderFor(c.type);
    return p != nullptr && p->IsNodeItself();
  }

  // REQUIRES: mu_ held.
  void SkipDependents(size_t i) {
    for (size_t d : dependents_[i]) {
      if (st_[d] != StepState::kPending) continue;
      st_[d] = StepState::kSkipped;
      --pending_;
      report_.skipped.push_back(steps_[d]->address);
      deps_.log(steps_[d]->address + ": skipped (depends on " + steps_[i]->address +
                ", which failed)");
      SkipDependents(d);
    }
  }

  Status MakeContext(size_t i, StepContext* ctx) {
    const PlanChange& c = *steps_[i];
    ctx->node = nullptr;
    if (!c.node.empty()) {
      auto n = deps_.manifest->nodes.find(c.node);
      if (n == deps_.manifest->nodes.end())
        return Status::Error("node " + c.node + " is not in the manifests any more");
      ctx->node = &n->second;
    }
    NodeConnections* connections = deps_.connections;
    ctx->manifest = deps_.manifest;
    ctx->power = deps_.power;
    ctx->hub = deps_.hub;
    ctx->clock = deps_.clock;
    ctx->transport = c.node.empty() ? nullptr : connections->Get(c.node);
    ctx->node_transport = [connections](const std::string& node) { return connections->Get(node); };
    ctx->shared = &shared_;
    ctx->progress = [this, addr = c.address](const std::string& line) {
      deps_.log(addr + ": " + line);
    };
    ctx->checkpoint = [this, i](const nlohmann::json& attrs) {
      std::lock_guard<std::mutex> lock(mu_);
      state_->Upsert(RecordOf(*steps_[i], attrs));
      return Save();
    };
    if (ctx->transport && !ReachesNodeItself(c)) {
      Status s = ctx->transport->Connect();
      if (!s.ok()) return s;
    }
    return Status::OK();
  }

  // Why step `c` is not tried at all: its node could not be reached by an
  // earlier step of this apply (a node that lost power, as Ansible drops an
  // UNREACHABLE host from the play), so it fails at once instead of waiting
  // out a connect timeout of its own.
  std::optional<std::string> NodeGoneDark(const PlanChange& c) {
    if (c.node.empty() || ReachesNodeItself(c)) return std::nullopt;
    std::lock_guard<std::mutex> lock(mu_);
    auto it = dark_nodes_.find(c.node);
    if (it == dark_nodes_.end()) return std::nullopt;
    return "not tried: " + c.node + " could not be reached earlier in this apply (" + it->second +
           "); apply again once it answers";
  }

  // What the outcome `s` of step `c` says of its node. REQUIRES: mu_ held.
  void NoteReachability(const PlanChange& c, const Status& s) {
    if (c.node.empty()) return;
    if (s.ok() && ReachesNodeItself(c))
      dark_nodes_.erase(c.node);  // a power-on step brought it up
    else if (!s.ok() && s.unreachable())
      dark_nodes_.emplace(c.node, s.message());
  }

  // The provider's Apply for step i, with its context (outside mu_).
  Result<nlohmann::json> ApplyStep(size_t i) {
    const PlanChange& c = *steps_[i];
    if (IsForget(c)) return nlohmann::json();
    if (std::optional<std::string> why = NodeGoneDark(c)) return Status::Unreachable(*why);
    StepContext ctx;
    std::optional<ResourceRecord> rec;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (const ResourceRecord* r = state_->Find(c.address)) rec = *r;
    }
    ctx.record = rec ? &*rec : nullptr;
    Status s = MakeContext(i, &ctx);
    if (!s.ok()) return s;
    const Provider* p = ProviderFor(c.type);
    if (p == nullptr) return Result<nlohmann::json>::Error("no provider for type " + c.type);
    if (c.gate && deps_.gate) return deps_.gate(c, ctx);
    return p->Apply(c, ctx);
  }

  // Records step i's outcome in the state and the report. REQUIRES: mu_ held.
  void FinishStep(size_t i, const Result<nlohmann::json>& result,
                  std::chrono::steady_clock::time_point start) {
    const PlanChange& c = *steps_[i];
    Status s = result.status();
    NoteReachability(c, s);
    if (s.ok()) {
      applied_[i] = result.value();
      if (result.value().is_null())
        state_->Remove(c.address);
      else
        state_->Upsert(RecordOf(c, result.value()));
      s = Save();
      if (!s.ok()) s = s.Prefixed("writing state after " + c.address);
    }
    if (s.ok()) {
      st_[i] = StepState::kDone;
      completion_order_.push_back(i);
      report_.done.push_back(c.address);
      deps_.log(c.address + ": complete after " + Seconds(deps_.clock, start));
    } else {
      st_[i] = StepState::kFailed;
      report_.failed.push_back(c.address + ": " + s.message());
      deps_.log("Error: " + c.address + (c.node.empty() ? "" : " on " + c.node) + ": " +
                s.message());
      SkipDependents(i);
    }
  }

  void RunStep(size_t i) {
    const PlanChange& c = *steps_[i];
    auto start = deps_.clock->SteadyNow();
    deps_.log(c.address + ": " + Verb(c.action) + "... [" + c.summary + "]");
    Result<nlohmann::json> result = ApplyStep(i);
    std::lock_guard<std::mutex> lock(mu_);
    FinishStep(i, result, start);
  }

  // A pending step whose dependencies are done and whose node is free.
  // REQUIRES: mu_ held.
  std::optional<size_t> PickReady() const {
    for (size_t i = 0; i < steps_.size(); ++i) {
      if (st_[i] != StepState::kPending || busy_nodes_.count(steps_[i]->node)) continue;
      bool ready = true;
      for (size_t d : deps_of_[i]) ready = ready && st_[d] == StepState::kDone;
      if (ready) return i;
    }
    return std::nullopt;
  }

  void Worker() {
    std::unique_lock<std::mutex> lock(mu_);
    while (true) {
      if (state_unwritable_) StopPending();
      if (pending_ == 0) return;
      std::optional<size_t> pick = PickReady();
      if (!pick) {
        cv_.wait(lock);
        continue;
      }
      size_t i = *pick;
      st_[i] = StepState::kRunning;
      --pending_;
      busy_nodes_.insert(steps_[i]->node);
      lock.unlock();
      RunStep(i);
      lock.lock();
      busy_nodes_.erase(steps_[i]->node);
      cv_.notify_all();
    }
  }

  // The failed unit: done steps that a failed step needed, transitively.
  std::set<size_t> FailedUnit() const {
    std::set<size_t> unit;
    std::vector<size_t> stack;
    for (size_t i = 0; i < steps_.size(); ++i)
      if (st_[i] == StepState::kFailed) stack.push_back(i);
    while (!stack.empty()) {
      size_t i = stack.back();
      stack.pop_back();
      for (size_t d : deps_of_[i])
        if (st_[d] == StepState::kDone && unit.insert(d).second) stack.push_back(d);
    }
    return unit;
  }

  bool StillNeeded(size_t i) const {
    for (size_t d : dependents_[i])
      if (st_[d] == StepState::kDone) return true;
    return false;
  }

  void UndoStep(size_t i) {
    const PlanChange& c = *steps_[i];
    const Provider* p = ProviderFor(c.type);
    if (p == nullptr || IsForget(c)) return;
    StepContext ctx;
    bool undone = false;
    std::optional<std::string> why = NodeGoneDark(c);
    Status s = why ? Status::Unreachable(*why) : MakeContext(i, &ctx);
    ctx.record = state_->Find(c.address);
    if (s.ok()) s = p->Undo(c, applied_[i], ctx, &undone);
    if (!s.ok()) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        NoteReachability(c, s);
      }
      report_.rollback_failed.push_back(c.address + ": " + s.message());
      deps_.log("Error: rolling back " + c.address + ": " + s.message());
      return;
    }
    if (!undone) {
      report_.kept.push_back(c.address);
      deps_.log(c.address + ": kept (not undone: " + c.type + " changes are kept on failure)");
      return;
    }
    st_[i] = StepState::kUndone;
    if (prior_[i])
      state_->Upsert(*prior_[i]);
    else
      state_->Remove(c.address);
    Status saved = Save();
    if (!saved.ok()) report_.rollback_failed.push_back(c.address + ": " + saved.message());
    report_.undone.push_back(c.address);
    deps_.log(c.address + ": rolled back");
  }

  const Executor::Deps& deps_;
  State* state_;
  std::vector<const PlanChange*> steps_;
  std::vector<std::vector<size_t>> deps_of_, dependents_;
  std::vector<StepState> st_;
  std::vector<nlohmann::json> applied_;
  std::vector<std::optional<ResourceRecord>> prior_;
  std::vector<size_t> completion_order_;
  SharedWork shared_;  // a fan-out chain run once for all its targets
  std::mutex mu_;
  std::condition_variable cv_;
  std::set<std::string> busy_nodes_;
  std::map<std::string, std::string> dark_nodes_;  // node -> why it could not be reached
  size_t pending_ = 0;
  bool serial_bumped_ = false;
  bool state_unwritable_ = false;  // a save failed: apply stops
  ApplyReport report_;
};

ApplyReport Executor::Apply(const Plan& plan, State* state, const ApplyOptions& options) {
  ApplyRun run(deps_, plan, state);
  run.Walk(options.parallelism);
  if (!run.report().failed.empty() && options.rollback) run.Rollback();
  return run.report();
}

}  // namespace fleet
