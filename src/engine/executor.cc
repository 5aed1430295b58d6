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

std::string Seconds(std::chrono::steady_clock::time_point since) {
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
  char buf[32];
  snprintf(buf, sizeof buf, "%.1fs", s);
  return buf;
}

}  // namespace

Executor::Executor(const Manifest* manifest,
                   const std::vector<std::unique_ptr<Provider>>* providers,
                   NodeConnections* connections, StateStore* store, PowerSwitch* power,
                   std::function<void(const std::string&)> log)
    : manifest_(manifest),
      providers_(providers),
      connections_(connections),
      store_(store),
      power_(power),
      log_(std::move(log)) {}

ApplyReport Executor::Apply(const Plan& plan, State* state, const ApplyOptions& options) {
  std::vector<const PlanChange*> steps;
  std::map<std::string, size_t> index;
  for (const PlanChange& c : plan.changes) {
    if (c.action == Action::kNoop) continue;
    index[c.address] = steps.size();
    steps.push_back(&c);
  }
  const size_t n = steps.size();
  std::vector<std::vector<size_t>> deps(n), dependents(n);
  for (size_t i = 0; i < n; ++i)
    for (const std::string& d : steps[i]->depends_on)
      if (auto it = index.find(d); it != index.end()) {
        deps[i].push_back(it->second);
        dependents[it->second].push_back(i);
      }

  std::vector<StepState> st(n, StepState::kPending);
  std::vector<nlohmann::json> applied(n);
  std::vector<std::optional<ResourceRecord>> prior(n);
  for (size_t i = 0; i < n; ++i)
    if (const ResourceRecord* r = state->Find(steps[i]->address)) prior[i] = *r;
  std::vector<size_t> completion_order;
  std::mutex mu;
  std::condition_variable cv;
  std::set<std::string> busy_nodes;
  size_t pending = n;
  bool serial_bumped = false;
  // Set when a save fails: nothing more starts, since what it did could not
  // be recorded (the next plan re-probes what the finished steps did).
  bool state_unwritable = false;
  ApplyReport report;

  auto provider_for = [&](const std::string& type) -> const Provider* {
    for (const auto& p : *providers_)
      if (p->type() == type) return p.get();
    return nullptr;
  };
  // REQUIRES: mu held.
  auto save = [&]() -> Status {
    if (!serial_bumped) {
      ++state->serial;
      serial_bumped = true;
    }
    Status saved = store_->Save(*state);
    if (!saved.ok()) state_unwritable = true;
    return saved;
  };
  auto record_of = [&](const PlanChange& c, const nlohmann::json& attrs) {
    ResourceRecord r;
    r.address = c.address;
    r.type = c.type;
    r.node = c.node;
    r.attributes = attrs;
    r.updated_at = NowRfc3339();
    return r;
  };
  // REQUIRES: mu held.
  std::function<void(size_t)> skip_dependents = [&](size_t i) {
    for (size_t d : dependents[i]) {
      if (st[d] != StepState::kPending) continue;
      st[d] = StepState::kSkipped;
      --pending;
      report.skipped.push_back(steps[d]->address);
      log_(steps[d]->address + ": skipped (depends on " + steps[i]->address + ", which failed)");
      skip_dependents(d);
    }
  };

  auto make_context = [&](size_t i, StepContext* ctx) -> Status {
    const PlanChange& c = *steps[i];
    ctx->node = nullptr;
    if (!c.node.empty()) {
      auto n = manifest_->nodes.find(c.node);
      if (n == manifest_->nodes.end())
        return Status::Error("node " + c.node + " is not in the manifests any more");
      ctx->node = &n->second;
    }
    ctx->manifest = manifest_;
    ctx->power = power_;
    ctx->transport = c.node.empty() ? nullptr : connections_->Get(c.node);
    ctx->node_transport = [this](const std::string& node) { return connections_->Get(node); };
    ctx->progress = [this, addr = c.address](const std::string& line) { log_(addr + ": " + line); };
    ctx->checkpoint = [&, i](const nlohmann::json& attrs) {
      std::lock_guard<std::mutex> lock(mu);
      state->Upsert(record_of(*steps[i], attrs));
      return save();
    };
    // Power steps reach the node themselves; everything else needs it up.
    if (ctx->transport && c.type != "node") {
      Status s = ctx->transport->Connect();
      if (!s.ok()) return s;
    }
    return Status::OK();
  };

  auto run_step = [&](size_t i) {
    const PlanChange& c = *steps[i];
    auto start = std::chrono::steady_clock::now();
    log_(c.address + ": " + Verb(c.action) + "... [" + c.summary + "]");
    Result<nlohmann::json> result = nlohmann::json();
    if (c.detail.value("forget", false)) {
      result = nlohmann::json();
    } else {
      StepContext ctx;
      std::optional<ResourceRecord> rec;
      {
        std::lock_guard<std::mutex> lock(mu);
        if (const ResourceRecord* r = state->Find(c.address)) rec = *r;
      }
      ctx.record = rec ? &*rec : nullptr;
      Status s = make_context(i, &ctx);
      const Provider* p = provider_for(c.type);
      if (!s.ok())
        result = s;
      else if (p == nullptr)
        result = Result<nlohmann::json>::Error("no provider for type " + c.type);
      else
        result = p->Apply(c, ctx);
    }
    std::lock_guard<std::mutex> lock(mu);
    Status s = result.status();
    if (s.ok()) {
      applied[i] = result.value();
      if (result.value().is_null())
        state->Remove(c.address);
      else
        state->Upsert(record_of(c, result.value()));
      s = save();
      if (!s.ok()) s = s.Prefixed("writing state after " + c.address);
    }
    if (s.ok()) {
      st[i] = StepState::kDone;
      completion_order.push_back(i);
      report.done.push_back(c.address);
      log_(c.address + ": complete after " + Seconds(start));
    } else {
      st[i] = StepState::kFailed;
      report.failed.push_back(c.address + ": " + s.message());
      log_("Error: " + c.address + (c.node.empty() ? "" : " on " + c.node) + ": " + s.message());
      skip_dependents(i);
    }
  };

  auto worker = [&] {
    std::unique_lock<std::mutex> lock(mu);
    while (true) {
      if (state_unwritable) {
        for (size_t i = 0; i < n; ++i) {
          if (st[i] != StepState::kPending) continue;
          st[i] = StepState::kSkipped;
          --pending;
          report.skipped.push_back(steps[i]->address);
          log_(steps[i]->address + ": not started (the state cannot be written; apply stops)");
        }
        cv.notify_all();
      }
      if (pending == 0) return;
      std::optional<size_t> pick;
      for (size_t i = 0; i < n && !pick; ++i) {
        if (st[i] != StepState::kPending || busy_nodes.count(steps[i]->node)) continue;
        bool ready = true;
        for (size_t d : deps[i]) ready = ready && st[d] == StepState::kDone;
        if (ready) pick = i;
      }
      if (!pick) {
        cv.wait(lock);
        continue;
      }
      size_t i = *pick;
      st[i] = StepState::kRunning;
      --pending;
      busy_nodes.insert(steps[i]->node);
      lock.unlock();
      run_step(i);
      lock.lock();
      busy_nodes.erase(steps[i]->node);
      cv.notify_all();
    }
  };

  {
    std::vector<std::thread> threads;
    int workers = std::max(1, std::min<int>(options.parallelism, static_cast<int>(n)));
    for (int w = 0; w < workers; ++w) threads.emplace_back(worker);
    for (auto& t : threads) t.join();
  }

  if (!report.failed.empty() && options.rollback) {
    // The failed unit: done steps that a failed step needed, transitively.
    std::set<size_t> unit;
    std::vector<size_t> stack;
    for (size_t i = 0; i < n; ++i)
      if (st[i] == StepState::kFailed) stack.push_back(i);
    while (!stack.empty()) {
      size_t i = stack.back();
      stack.pop_back();
      for (size_t d : deps[i])
        if (st[d] == StepState::kDone && unit.insert(d).second) stack.push_back(d);
    }
    for (auto it = completion_order.rbegin(); it != completion_order.rend(); ++it) {
      size_t i = *it;
      if (!unit.count(i)) continue;
      bool still_needed = false;
      for (size_t d : dependents[i]) still_needed = still_needed || st[d] == StepState::kDone;
      if (still_needed) continue;
      const PlanChange& c = *steps[i];
      const Provider* p = provider_for(c.type);
      if (p == nullptr || c.detail.value("forget", false)) continue;
      StepContext ctx;
      Status s = make_context(i, &ctx);
      ctx.record = state->Find(c.address);
      bool undone = false;
      if (s.ok()) s = p->Undo(c, applied[i], ctx, &undone);
      if (!s.ok()) {
        report.rollback_failed.push_back(c.address + ": " + s.message());
        log_("Error: rolling back " + c.address + ": " + s.message());
        continue;
      }
      if (!undone) {
        report.kept.push_back(c.address);
        log_(c.address + ": kept (not undone: " + c.type + " changes are kept on failure)");
        continue;
      }
      st[i] = StepState::kUndone;
      if (prior[i])
        state->Upsert(*prior[i]);
      else
        state->Remove(c.address);
      Status saved = save();
      if (!saved.ok()) report.rollback_failed.push_back(c.address + ": " + saved.message());
      report.undone.push_back(c.address);
      log_(c.address + ": rolled back");
    }
  }
  return report;
}

}  // namespace fleet
