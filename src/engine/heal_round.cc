#include "src/engine/heal_round.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <ctime>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

#include "providers/deployment/deployment_diff.h"
#include "providers/deployment/serve_heal.h"
#include "providers/shared/gpu_facts.h"
#include "providers/shared/serving/deployment_json.h"
#include "src/clock_wait.h"
#include "src/engine/heal_policy.h"
#include "src/provider.h"
#include "state/state.h"

namespace fleet {
namespace {

// A recorded serve the manifests still declare on its node.
struct Serve {
  std::string address, name, node;
  const DeploymentSpec* spec = nullptr;
  ServeSeen seen;
  int rank = 0;  // its place in a group (0: the head, or a lone serve)
};

std::string Shorten(std::string s, size_t n) {
  for (char& c : s)
    if (c == '\n') c = ' ';
  if (s.size() > n) s = s.substr(0, n) + "...";
  return s;
}

// The first smoke check of the serve that did not pass this round ("cut" is
// the budget's fault and "unchecked" the controller's, not the serve's), as
// "smoke CHECK: DETAIL".
std::string SmokeFailure(const std::vector<SmokeResult>* checks, const std::string& name,
                         const std::string& node) {
  if (checks == nullptr) return "";
  for (const SmokeResult& r : *checks) {
    if (r.deployment != name || r.node != node || r.passed() || r.result == "cut" ||
        r.result == "unchecked")
      continue;
    std::string what = "smoke " + r.check + ": " + r.detail;
    if (!r.reply.empty()) what += ": got '" + r.reply + "'";
    return Shorten(what, 200);
  }
  return "";
}

ServeSeen SeenBy(const ProbeResult& probed, const std::vector<SmokeResult>* checks, const Serve& s,
                 const DeploymentRecord& rec) {
  ServeSeen seen;
  auto f = probed.facts.find(s.node);
  auto a = probed.actual.find(s.address);
  seen.reachable = f != probed.facts.end() && f->second.reachable && a != probed.actual.end() &&
                   a->second.probed && a->second.error.empty();
  if (!seen.reachable) return seen;
  const ContainerProbe p = a->second.attributes.get<ContainerProbe>();
  seen.exists = p.exists;
  seen.state = p.state;
  seen.exit_code = p.exit_code;
  seen.has_health = !rec.want.shown.health.empty();
  seen.health = p.health < 0 ? 0 : p.health;
  // 0 marks a busy round; Healer::Round turns it into seconds in a row.
  if (p.exists && p.state == "running" && p.health_timed_out) seen.busy_s = 0;
  seen.smoke_failure = SmokeFailure(checks, s.name, s.node);
  return seen;
}

// The most GPU memory one of the node's GPUs could give a start, as the
// round's probe measured it (no CUDA context while serves run): free memory
// plus, on unified memory, the page cache a drop gives back (the heal drops
// it when free alone is short); none when unknown. The same figure with and
// without a context, so a heal's "memory back" compares like with like.
struct GpuRoom {
  uint64_t free = 0;         // as cuMemGetInfo counts it
  uint64_t reclaimable = 0;  // unified memory's page cache
  uint64_t Total() const { return free + reclaimable; }
};

std::optional<GpuRoom> FreeGpuBytes(const ProbeResult& probed, const std::string& node) {
  auto f = probed.facts.find(node);
  GpuFacts gpu;
  if (f == probed.facts.end() || !GpuFactsFromJson(f->second.gpu, &gpu)) return std::nullopt;
  std::optional<GpuRoom> best;
  for (const GpuInfo& g : gpu.gpus) {
    if (!g.memory_free_bytes) continue;
    GpuRoom room{*g.memory_free_bytes,
                 g.unified_memory ? g.memory_reclaimable_bytes.value_or(0) : uint64_t{0}};
    if (!best || room.Total() > best->Total()) best = room;
  }
  return best;
}

nlohmann::json Event(const std::string& type, const Serve& s, const std::string& reason,
                     const std::string& outcome, const std::string& detail) {
  return {{"time", NowRfc3339()}, {"event", type},   {"address", s.address},
          {"deployment", s.name}, {"node", s.node},  {"reason", reason},
          {"outcome", outcome},   {"detail", detail}};
}

// A heal to run off the lock: what its start recorded, and, once its job
// ran it, what it brought back.
struct HealStep {
  Serve serve;  // (serve.spec is the round's: not used off the lock)
  HealDecision decision;
  DeploymentRecord record;       // its record as its start wrote it (in progress)
  std::optional<uint64_t> free;  // free + reclaimable page cache (FreeGpuBytes)
  bool drop_page_cache = false;  // the start drops the page cache first
  bool ok = false;
  DeploymentRecord healed;
  std::string error;
  double took_s = 0;
};

// The state read under the lock, and the records written back into it
// (the serial bumped once).
class RecordWriter {
 public:
  RecordWriter(StateStore* store, State state, std::function<void(const std::string&)> progress)
      : store_(store), state_(std::move(state)), progress_(std::move(progress)) {}

  std::optional<DeploymentRecord> Record(const std::string& address) const {
    const ResourceRecord* r = state_.Find(address);
    return r ? DeploymentRecordFrom(r->attributes) : std::nullopt;
  }

  void Write(const std::string& address, const DeploymentRecord& rec) {
    const ResourceRecord* old = state_.Find(address);
    ResourceRecord r = *old;
    r.attributes = rec;
    r.updated_at = NowRfc3339();
    state_.Upsert(std::move(r));
    if (!bumped_) {
      ++state_.serial;
      bumped_ = true;
    }
    Status saved = store_->Save(state_);
    if (!saved.ok() && progress_) progress_("heal: cannot write the state: " + saved.message());
  }

 private:
  StateStore* store_;
  State state_;
  std::function<void(const std::string&)> progress_;
  bool bumped_ = false;
};

// One round's decisions under the lock: each serve decided on its record's
// ledger, and the heals it starts recorded as started (a group's workers
// before its head, one job per group). The heals themselves run after the
// lock is let go.
class LockedRound {
 public:
  LockedRound(const HealRoundInput& in, State state, std::map<std::string, int>* unhealthy)
      : in_(in), writer_(in.store, std::move(state), in.progress), unhealthy_(unhealthy) {}

  // At most `slots` jobs are started; the others wait for a later round.
  std::vector<std::vector<HealStep>> Run(std::vector<Serve> serves, int slots) {
    // Heads last: a group's head needs its workers up (as apply orders them).
    std::stable_sort(serves.begin(), serves.end(),
                     [](const Serve& a, const Serve& b) { return a.rank > b.rank; });
    std::set<std::string> group_heal;  // deployments whose group heals this round
    std::vector<std::pair<Serve, HealDecision>> heals;
    for (const Serve& s : serves) {
      HealDecision d = Decide(s);
      if (d.action == HealAction::kHeal) {
        heals.push_back({s, d});
        if (s.spec->nodes.size() > 1 && IsGroup(s)) group_heal.insert(s.name);
      }
    }
    // A rank cannot rejoin a running group: every rank of it restarts.
    for (const Serve& s : serves) {
      if (!group_heal.count(s.name)) continue;
      bool listed = std::any_of(heals.begin(), heals.end(),
                                [&](const auto& h) { return h.first.address == s.address; });
      HealDecision group;
      group.action = HealAction::kHeal;
      group.reason = "group";
      group.detail = "another rank of its group heals";
      if (!listed) heals.push_back({s, group});
    }
    std::stable_sort(heals.begin(), heals.end(),
                     [](const auto& a, const auto& b) { return a.first.rank > b.first.rank; });
    // One job per group (its ranks in order), one per lone serve.
    std::vector<std::vector<std::pair<Serve, HealDecision>>> jobs;
    std::map<std::string, size_t> job_of_group;
    for (const auto& h : heals) {
      if (group_heal.count(h.first.name)) {
        auto [it, fresh] = job_of_group.emplace(h.first.name, jobs.size());
        if (fresh) jobs.emplace_back();
        jobs[it->second].push_back(h);
      } else {
        jobs.push_back({h});
      }
    }
    std::vector<std::vector<HealStep>> started;
    for (const auto& job : jobs) {
      if (static_cast<int>(started.size()) >= slots) {
        if (in_.progress)
          in_.progress("heal: " + job.front().first.address +
                       " waits for a heal to end (--heal-parallelism)");
        continue;
      }
      std::vector<HealStep> steps;
      for (const auto& [s, d] : job)
        if (std::optional<HealStep> step = Start(s, d)) steps.push_back(std::move(*step));
      if (!steps.empty()) started.push_back(std::move(steps));
    }
    return started;
  }

  std::vector<nlohmann::json> TakeEvents() { return std::move(events_); }

 private:
  bool IsGroup(const Serve& s) const {
    std::optional<DeploymentRecord> rec = writer_.Record(s.address);
    return rec && rec->want.shown.rank.has_value();
  }

  HealDecision Decide(const Serve& s) {
    std::optional<DeploymentRecord> rec = writer_.Record(s.address);
    if (!rec) return {};
    HealLedger ledger = rec->heal.value_or(HealLedger{});
    const HealLedger before = ledger;
    HealDecision d = DecideHeal(s.spec->restart, s.spec->health.grace_rounds, s.seen,
                                (*unhealthy_)[s.address], in_.clock->UnixSeconds(), &ledger);
    if (d.settled == "finished")
      events_.push_back(
          Event("heal", s, "", "healed",
                "the heal a stopped watch began ended well: " + s.address + " serves again"));
    if (d.action == HealAction::kQuarantine)
      events_.push_back(Event("quarantine", s, d.reason, "quarantined",
                              ledger.quarantine + ": no more heals until an apply of " + s.address +
                                  " or `fleet heal reset " + s.address + "`"));
    if (nlohmann::json(ledger) != nlohmann::json(before)) {
      rec->heal = ledger;
      writer_.Write(s.address, *rec);
    }
    return d;
  }

  // The heal's start, recorded (a watch killed from here on: the next one
  // finishes it); nullopt when it waits for memory instead.
  std::optional<HealStep> Start(const Serve& s, const HealDecision& d) {
    std::optional<DeploymentRecord> rec = writer_.Record(s.address);
    if (!rec) return std::nullopt;
    HealLedger ledger = rec->heal.value_or(HealLedger{});
    const int64_t now = in_.clock->UnixSeconds();
    const std::optional<GpuRoom> room = FreeGpuBytes(*in_.probed, s.node);
    const std::optional<uint64_t> free =
        room ? std::optional<uint64_t>(room->Total()) : std::nullopt;
    std::string why;
    if (free &&
        !MemoryBack(*free, rec->want.gpu_memory_bytes, ledger.free_before_start_bytes, &why)) {
      NoteTry(now, "waiting for memory on " + s.node + ": " + why, &ledger);
      ++ledger.failed_in_row;
      nlohmann::json e = Event("heal_wait", s, d.reason, "waiting",
                               "waiting for memory on " + s.node + ": " + why);
      e["attempt"] = ledger.tries.size();
      events_.push_back(e);
      rec->heal = ledger;
      writer_.Write(s.address, *rec);
      return std::nullopt;
    }
    if (!d.resume) NoteTry(now, d.detail, &ledger);  // a resumed heal is the same try
    ledger.in_progress_since = now;
    rec->heal = ledger;
    writer_.Write(s.address, *rec);
    HealStep step;
    step.serve = s;
    step.serve.spec = nullptr;
    step.decision = d;
    step.record = *rec;
    step.free = free;
    // Free alone short, the page cache makes up the rest: drop it first.
    step.drop_page_cache = room && room->reclaimable > 0 && room->free < rec->want.gpu_memory_bytes;
    return step;
  }

  const HealRoundInput& in_;
  RecordWriter writer_;
  std::map<std::string, int>* unhealthy_;
  std::vector<nlohmann::json> events_;
};

// Brings one serve back on the job's own connections and manifest.
Result<DeploymentRecord> BringBack(const Manifest& m, NodeConnections* connections, Clock* clock,
                                   const HealStep& step,
                                   const std::function<void(const std::string&)>& progress) {
  Transport* t = connections->Get(step.serve.node);
  Status c = t->Connect();
  if (!c.ok()) return c;
  StepContext ctx;
  ctx.clock = clock;
  ctx.transport = t;
  ctx.node = &m.nodes.at(step.serve.node);
  ctx.manifest = &m;
  ctx.node_transport = [connections](const std::string& n) { return connections->Get(n); };
  if (progress)
    ctx.progress = [&progress, &step](const std::string& line) {
      progress(step.serve.address + ": " + line);
    };
  return HealServe(ctx, step.serve.name, step.record, step.drop_page_cache);
}

// The end of a heal written into `writer`'s state: its ledger settled, the
// healed record (its new container) when it came back. A record whose heal
// is no longer the one this step started (an apply wrote it anew meanwhile)
// is left as it is: the apply took the serve over.
nlohmann::json RecordEnd(const HealStep& step, int64_t now_s, RecordWriter* writer) {
  const Serve& s = step.serve;
  std::optional<DeploymentRecord> now = writer->Record(s.address);
  const int64_t started = step.record.heal ? step.record.heal->in_progress_since : 0;
  if (!now || !now->heal || now->heal->in_progress_since != started)
    return Event("heal", s, step.decision.reason, "taken over",
                 s.address +
                     " was written anew while it healed (an apply replaced it): the "
                     "apply's serve stands, the heal records nothing");
  HealLedger ledger = *now->heal;
  ledger.in_progress_since = 0;
  ledger.last_try_at = now_s;
  DeploymentRecord next = step.ok ? step.healed : *now;
  if (step.ok) {
    ledger.unproven = true;
    if (step.free) ledger.free_before_start_bytes = *step.free;
  } else {
    ++ledger.failed_in_row;
  }
  next.heal = ledger;
  writer->Write(s.address, next);
  nlohmann::json e = Event("heal", s, step.decision.reason, step.ok ? "healed" : "failed",
                           step.ok ? step.decision.detail : step.error);
  e["attempt"] = ledger.tries.size();
  e["duration_s"] = std::round(step.took_s * 100) / 100;
  return e;
}

}  // namespace

// One heal (a group's ranks, in order) running beside the rounds, on a copy
// of the manifests and SSH sessions of its own: a serve's health wait holds
// a node's session for minutes, and the rounds probe that node meanwhile.
struct Healer::Job {
  std::unique_ptr<Manifest> manifest;
  std::unique_ptr<NodeConnections> connections;
  std::vector<HealStep> steps;
  std::function<void(const std::string&)> progress;
  Clock* clock = nullptr;
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;  // under mu
  std::thread thread;

  void Run() {
    for (HealStep& step : steps) {
      const auto start = clock->SteadyNow();
      Result<DeploymentRecord> healed =
          BringBack(*manifest, connections.get(), clock, step, progress);
      step.took_s = std::chrono::duration<double>(clock->SteadyNow() - start).count();
      step.ok = healed.ok();
      if (healed.ok())
        step.healed = *healed;
      else
        step.error = healed.status().message();
    }
    std::lock_guard<std::mutex> l(mu);
    done = true;
    cv.notify_all();
  }
};

Healer::Healer(int parallel) : parallel_(std::max(1, parallel)) {}

Healer::~Healer() {
  for (auto& job : jobs_)
    if (job->thread.joinable()) job->thread.detach();
  for (auto& job : jobs_) (void)job.release();  // still used by its thread
}

std::vector<nlohmann::json> Healer::Finish(const HealRoundInput& in, int64_t wait_ms) {
  std::vector<nlohmann::json> events;
  auto done = [](Job* job) {
    std::lock_guard<std::mutex> l(job->mu);
    return job->done;
  };
  if (wait_ms < 0) {
    for (auto& job : jobs_) {
      std::unique_lock<std::mutex> l(job->mu);
      job->cv.wait(l, [&] { return job->done; });
    }
  } else {
    // On the round's clock: a FakeClock's round does not wait out the heals.
    WaitOnClock(in.clock, in.clock->SteadyNow() + std::chrono::milliseconds(wait_ms), [&] {
      return std::all_of(jobs_.begin(), jobs_.end(),
                         [&](const auto& job) { return done(job.get()); });
    });
  }
  std::vector<Job*> ended;
  for (auto& job : jobs_)
    if (done(job.get())) ended.push_back(job.get());
  if (ended.empty()) return events;
  Result<std::unique_ptr<StateLock>> lock =
      LockWithTimeout(in.store, "heal", in.lock_timeout_ms, in.clock);
  if (!lock.ok()) {
    if (in.progress)
      in.progress(
          "heal: " + std::to_string(ended.size()) +
          " heal(s) ended; recorded once the state lock is free: " + lock.status().message());
    return events;
  }
  Result<State> state = in.store->Load();
  if (!state.ok()) {
    if (in.progress) in.progress("heal: cannot read the state: " + state.status().message());
    return events;
  }
  RecordWriter writer(in.store, std::move(*state), in.progress);
  for (Job* job : ended) {
    job->thread.join();
    for (const HealStep& step : job->steps)
      events.push_back(RecordEnd(step, in.clock->UnixSeconds(), &writer));
  }
  std::erase_if(jobs_, [&](const std::unique_ptr<Job>& j) {
    return std::find(ended.begin(), ended.end(), j.get()) != ended.end();
  });
  return events;
}

std::vector<nlohmann::json> Healer::Drain(const HealRoundInput& in) {
  std::vector<nlohmann::json> events = Finish(in, -1);
  for (const nlohmann::json& e : events) (void)in.store->AppendEvent(e);
  return events;
}

std::vector<nlohmann::json> Healer::Round(const HealRoundInput& in) {
  std::vector<nlohmann::json> events = Finish(in, 0);
  std::set<std::string> healing;  // serves a running heal holds: not decided again
  for (const auto& job : jobs_)
    for (const HealStep& step : job->steps) healing.insert(step.serve.address);
  Result<State> peek = in.store->Load();
  if (!peek.ok()) {
    if (in.progress) in.progress("heal: cannot read the state: " + peek.status().message());
    return events;
  }
  std::vector<Serve> serves;
  std::vector<Serve> would_heal;
  bool anything = false;
  for (const ResourceRecord& r : peek->resources) {
    if (RoleOf(r.type) != Role::kServe) continue;
    if (healing.count(r.address)) {
      unhealthy_rounds_[r.address] = 0;
      continue;
    }
    Serve s{r.address, ResourceName("deployment", r.address), r.node};
    auto decl = in.manifest->deployments.find(s.name);
    if (decl == in.manifest->deployments.end() ||
        !deployment_internal::DeclaredOn(*in.manifest, s.name, s.node))
      continue;  // dropped from the manifests: drift for an apply, not a heal
    const std::vector<std::string>& nodes = decl->second.nodes;
    s.spec = &decl->second;
    s.rank = static_cast<int>(std::find(nodes.begin(), nodes.end(), s.node) - nodes.begin());
    std::optional<DeploymentRecord> rec = DeploymentRecordFrom(r.attributes);
    // A record without a container id is one an apply wrote before a start
    // that did not end well: never serving, nothing to bring back (the plan
    // starts it).
    if (!rec || rec->container_id.empty()) continue;
    s.seen = SeenBy(*in.probed, in.checks, s, *rec);
    s.seen.busy_grace_s = s.spec->health.busy_grace_s;
    if (s.seen.busy_s == 0) {
      busy_since_.try_emplace(s.address, in.clock->UnixSeconds());
      s.seen.busy_s = in.clock->UnixSeconds() - busy_since_[s.address];
    } else {
      busy_since_.erase(s.address);
    }
    const bool sick = s.seen.reachable && s.seen.exists && s.seen.state == "running" &&
                      s.seen.has_health && !(s.seen.health >= 200 && s.seen.health < 300);
    unhealthy_rounds_[s.address] = sick ? unhealthy_rounds_[s.address] + 1 : 0;
    // Without the lock: does this round have anything to do or settle?
    HealLedger ledger = rec->heal.value_or(HealLedger{});
    const HealLedger before = ledger;
    HealDecision d = DecideHeal(s.spec->restart, s.spec->health.grace_rounds, s.seen,
                                unhealthy_rounds_[s.address], in.clock->UnixSeconds(), &ledger);
    if (d.action == HealAction::kHeal) would_heal.push_back(s);
    if (d.action == HealAction::kHeal || d.action == HealAction::kQuarantine ||
        nlohmann::json(ledger) != nlohmann::json(before))
      anything = true;
    if (d.action == HealAction::kBackoff && in.progress)
      in.progress("heal: " + s.address + ": " + d.detail + "; next try in " +
                  std::to_string(d.next_try_at - in.clock->UnixSeconds()) + " s (backoff)");
    serves.push_back(std::move(s));
  }
  if (anything) {
    std::vector<std::vector<HealStep>> started;
    {
      Result<std::unique_ptr<StateLock>> lock =
          LockWithTimeout(in.store, "heal", in.lock_timeout_ms, in.clock);
      if (!lock.ok()) {
        // Never beside an apply: this round heals nothing, the next looks again.
        for (const Serve& s : would_heal)
          events.push_back(Event("heal_wait", s, "", "waiting",
                                 "the state lock is held: " + lock.status().message()));
      } else if (Result<State> state = in.store->Load(); state.ok()) {
        LockedRound round(in, std::move(*state), &unhealthy_rounds_);
        started = round.Run(std::move(serves), parallel_ - static_cast<int>(jobs_.size()));
        for (nlohmann::json& e : round.TakeEvents()) events.push_back(std::move(e));
      }
    }  // the lock is let go: the heals run without it
    for (std::vector<HealStep>& steps : started) {
      auto job = std::make_unique<Job>();
      job->manifest = std::make_unique<Manifest>(*in.manifest);
      job->connections = std::make_unique<NodeConnections>(job->manifest.get());
      job->steps = std::move(steps);
      job->progress = in.progress;
      job->clock = in.clock;
      Job* j = job.get();
      jobs_.push_back(std::move(job));
      j->thread = std::thread([j] { j->Run(); });
    }
    if (!started.empty())
      for (nlohmann::json& e : Finish(in, in.heal_wait_ms)) events.push_back(std::move(e));
  }
  for (const nlohmann::json& e : events) {
    Status s = in.store->AppendEvent(e);
    if (!s.ok() && in.progress) in.progress("heal: cannot keep the event: " + s.message());
  }
  return events;
}

}  // namespace fleet
