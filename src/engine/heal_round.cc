#include "src/engine/heal_round.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <optional>
#include <set>

#include "providers/deployment/deployment_diff.h"
#include "providers/deployment/deployment_json.h"
#include "providers/deployment/serve_heal.h"
#include "providers/node/gpu_facts.h"
#include "src/engine/heal_policy.h"
#include "state/state.h"

namespace fleet {
namespace {

using Clock = std::chrono::steady_clock;

int64_t UnixNow() { return static_cast<int64_t>(std::time(nullptr)); }

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

// The most GPU memory free on one of the node's GPUs, as the round's probe
// measured it (no CUDA context while serves run); none when unknown.
std::optional<uint64_t> FreeGpuBytes(const ProbeResult& probed, const std::string& node) {
  auto f = probed.facts.find(node);
  GpuFacts gpu;
  if (f == probed.facts.end() || !GpuFactsFromJson(f->second.gpu, &gpu)) return std::nullopt;
  std::optional<uint64_t> best;
  for (const GpuInfo& g : gpu.gpus)
    if (g.memory_free_bytes && (!best || *g.memory_free_bytes > *best)) best = g.memory_free_bytes;
  return best;
}

nlohmann::json Event(const std::string& type, const Serve& s, const std::string& reason,
                     const std::string& outcome, const std::string& detail) {
  return {{"time", NowRfc3339()}, {"event", type},   {"address", s.address},
          {"deployment", s.name}, {"node", s.node},  {"reason", reason},
          {"outcome", outcome},   {"detail", detail}};
}

// One round under the lock: the state read again, each serve decided on its
// record's ledger, the heals done (a group's workers before its head), the
// state written after each.
class LockedRound {
 public:
  LockedRound(const HealRoundInput& in, State state, std::map<std::string, int>* unhealthy)
      : in_(in), state_(std::move(state)), unhealthy_(unhealthy) {}

  std::vector<nlohmann::json> Run(std::vector<Serve> serves) {
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
    for (const auto& [s, d] : heals) Heal(s, d);
    return std::move(events_);
  }

 private:
  bool IsGroup(const Serve& s) const {
    std::optional<DeploymentRecord> rec = Record(s.address);
    return rec && rec->want.shown.rank.has_value();
  }

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
    Status saved = in_.store->Save(state_);
    if (!saved.ok() && in_.progress)
      in_.progress("heal: cannot write the state: " + saved.message());
  }

  HealDecision Decide(const Serve& s) {
    std::optional<DeploymentRecord> rec = Record(s.address);
    if (!rec) return {};
    HealLedger ledger = rec->heal.value_or(HealLedger{});
    const HealLedger before = ledger;
    HealDecision d = DecideHeal(s.spec->restart, s.spec->health.grace_rounds, s.seen,
                                (*unhealthy_)[s.address], UnixNow(), &ledger);
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
      Write(s.address, *rec);
    }
    return d;
  }

  void Heal(const Serve& s, const HealDecision& d) {
    std::optional<DeploymentRecord> rec = Record(s.address);
    if (!rec) return;
    HealLedger ledger = rec->heal.value_or(HealLedger{});
    const int64_t now = UnixNow();
    const std::optional<uint64_t> free = FreeGpuBytes(*in_.probed, s.node);
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
      Write(s.address, *rec);
      return;
    }
    if (!d.resume) NoteTry(now, d.detail, &ledger);  // a resumed heal is the same try
    ledger.in_progress_since = now;
    rec->heal = ledger;
    Write(s.address, *rec);  // a watch killed from here on: the next round finishes it
    const auto start = Clock::now();
    Result<DeploymentRecord> healed = Bring(s, *rec);
    const double took = std::chrono::duration<double>(Clock::now() - start).count();
    ledger.in_progress_since = 0;
    ledger.last_try_at = UnixNow();
    DeploymentRecord next = healed.ok() ? *healed : *rec;
    if (healed.ok()) {
      ledger.unproven = true;
      if (free) ledger.free_before_start_bytes = *free;
    } else {
      ++ledger.failed_in_row;
    }
    next.heal = ledger;
    Write(s.address, next);
    nlohmann::json e = Event("heal", s, d.reason, healed.ok() ? "healed" : "failed",
                             healed.ok() ? d.detail : healed.status().message());
    e["attempt"] = ledger.tries.size();
    e["duration_s"] = std::round(took * 100) / 100;
    events_.push_back(e);
  }

  Result<DeploymentRecord> Bring(const Serve& s, const DeploymentRecord& rec) {
    Transport* t = in_.connections->Get(s.node);
    Status c = t->Connect();
    if (!c.ok()) return c;
    StepContext ctx;
    ctx.transport = t;
    ctx.node = &in_.manifest->nodes.at(s.node);
    ctx.manifest = in_.manifest;
    NodeConnections* connections = in_.connections;
    ctx.node_transport = [connections](const std::string& n) { return connections->Get(n); };
    if (in_.progress)
      ctx.progress = [this, &s](const std::string& line) { in_.progress(s.address + ": " + line); };
    return HealServe(ctx, s.name, rec);
  }

  const HealRoundInput& in_;
  State state_;
  std::map<std::string, int>* unhealthy_;
  bool bumped_ = false;
  std::vector<nlohmann::json> events_;
};

}  // namespace

std::vector<nlohmann::json> Healer::Round(const HealRoundInput& in) {
  std::vector<nlohmann::json> events;
  Result<State> peek = in.store->Load();
  if (!peek.ok()) {
    if (in.progress) in.progress("heal: cannot read the state: " + peek.status().message());
    return events;
  }
  std::vector<Serve> serves;
  std::vector<Serve> would_heal;
  bool anything = false;
  for (const ResourceRecord& r : peek->resources) {
    if (r.type != "deployment") continue;
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
      busy_since_.try_emplace(s.address, UnixNow());
      s.seen.busy_s = UnixNow() - busy_since_[s.address];
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
                                unhealthy_rounds_[s.address], UnixNow(), &ledger);
    if (d.action == HealAction::kHeal) would_heal.push_back(s);
    if (d.action == HealAction::kHeal || d.action == HealAction::kQuarantine ||
        nlohmann::json(ledger) != nlohmann::json(before))
      anything = true;
    if (d.action == HealAction::kBackoff && in.progress)
      in.progress("heal: " + s.address + ": " + d.detail + "; next try in " +
                  std::to_string(d.next_try_at - UnixNow()) + " s (backoff)");
    serves.push_back(std::move(s));
  }
  if (anything) {
    Result<std::unique_ptr<StateLock>> lock = LockWithTimeout(in.store, "heal", in.lock_timeout_ms);
    if (!lock.ok()) {
      // Never beside an apply: this round heals nothing, the next looks again.
      for (const Serve& s : would_heal)
        events.push_back(Event("heal_wait", s, "", "waiting",
                               "the state lock is held: " + lock.status().message()));
    } else {
      Result<State> state = in.store->Load();
      if (state.ok())
        events = LockedRound(in, std::move(*state), &unhealthy_rounds_).Run(std::move(serves));
    }
  }
  for (const nlohmann::json& e : events) {
    Status s = in.store->AppendEvent(e);
    if (!s.ok() && in.progress) in.progress("heal: cannot keep the event: " + s.message());
  }
  return events;
}

}  // namespace fleet
