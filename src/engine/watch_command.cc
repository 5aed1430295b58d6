// fleet watch: plan (drift) and the smoke checks on a schedule, one JSON
// line per round; a state change is printed loudly and handed to
// --on-change. Holds no state lock (the state is only read), reads the
// manifests and opens fresh sessions every round (a node that went away
// and came back is simply seen again), stops cleanly on SIGINT/SIGTERM.
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <iostream>
#include <mutex>

#include "manifests/duration.h"
#include "manifests/own_fault.h"
#include "src/clock.h"
#include "src/clock_wait.h"
#include "src/engine/commands.h"
#include "src/engine/heal_round.h"
#include "src/engine/idle_round.h"
#include "src/engine/metrics_server.h"
#include "src/engine/node_connections.h"
#include "src/engine/on_change.h"
#include "src/engine/own_resources.h"
#include "src/engine/planner.h"
#include "src/engine/round_facts.h"
#include "src/engine/schedule_round.h"
#include "src/engine/serve_checks.h"
#include "src/engine/serve_commands.h"
#include "src/engine/sync_round.h"
#include "src/engine/wake_listener.h"
#include "src/engine/watch_changes.h"
#include "src/engine/watch_metrics.h"
#include "src/engine/watch_report.h"
#include "state/state_store.h"

namespace fleet {
namespace {

volatile sig_atomic_t g_stop = 0;
void OnSignal(int) { g_stop = 1; }

void CatchSignals() {
  struct sigaction sa {};
  sa.sa_handler = OnSignal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;  // no SA_RESTART: a sleep ends at once
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  signal(SIGPIPE, SIG_IGN);
}

// The plan's drift against `state`: how many changes, which addresses, how
// many of each kind (add, change, replace, destroy), plan errors.
// `probed` receives what the plan probed.
nlohmann::json Drift(const Manifest& m, const State& state, NodeConnections* connections,
                     ProbeResult* probed) {
  std::vector<std::unique_ptr<Provider>> providers = MakeProviders();
  std::unique_ptr<PowerSwitch> power = MakeDeclaredPowerSwitch(m.power);
  Planner planner(&m, &providers, connections, power.get());
  PlanOptions options;
  options.probed_out = probed;
  Plan plan = planner.MakePlan(state, options);
  nlohmann::json d = {{"changes", 0},
                      {"addresses", nlohmann::json::array()},
                      {"kinds", {{"add", 0}, {"change", 0}, {"replace", 0}, {"destroy", 0}}},
                      {"errors", DiagnosticLines(plan.errors)}};
  const std::map<Action, const char*> kind = {{Action::kCreate, "add"},
                                              {Action::kUpdate, "change"},
                                              {Action::kReplace, "replace"},
                                              {Action::kDelete, "destroy"}};
  for (const PlanChange& c : plan.changes) {
    if (c.action == Action::kNoop) continue;
    d["addresses"].push_back(c.address + " (" + ActionName(c.action) + ")");
    d["changes"] = d["changes"].get<int>() + 1;
    d["kinds"][kind.at(c.action)] = d["kinds"][kind.at(c.action)].get<int>() + 1;
  }
  return d;
}

// A round the controller failed itself (issue 44): says why in
// line["controller"], judges nothing (no checks, no drift, no heal).
nlohmann::json OwnFailure(nlohmann::json line, const std::string& why) {
  line["controller"] = {{"error", why}};
  line["checks"] = nlohmann::json::array();
  return line;
}

// The round's own failures, found after the fact: the headroom check again,
// else the first unchecked check, else the count. "" when there were none.
std::string OwnFailuresOfRound(uint64_t faults_before, const std::vector<SmokeResult>& checks) {
  Status now = CheckOwnHeadroom();
  if (!now.ok()) return now.message();
  const uint64_t n = OwnFaultCount() - faults_before;
  if (n == 0) return "";
  for (const SmokeResult& r : checks)
    if (r.result == "unchecked") return r.detail;
  return std::to_string(n) + " failure" + (n == 1 ? "" : "s") +
         " of the controller's own during the round (no file descriptor, its own network)";
}

// One round: the JSON line (without its change list); with --heal, its heal
// events under "heal".
// What a --heal round does about power beyond heal: the schedules' windows
// (bringing deployments up through `waker`), then idle off.
struct PowerRounds {
  ScheduleRound schedule;
  IdleOff idle;
  WakeListener* waker = nullptr;
};

// The round's schedule decisions, then its idle offs, into line["schedule"]
// and line["idle_off"].
void PowerRound(const GlobalOptions& g, const Manifest& m, StateStore* store,
                const ProbeResult& probed, const std::vector<SmokeResult>& checks,
                PowerRounds* power, nlohmann::json* line) {
  const int64_t now_s = g.clock->UnixSeconds();
  std::function<void(const std::string&)> progress;
  if (g.verbosity > 0) progress = [](const std::string& s) { std::cout << s << "\n"; };
  ScheduleRoundInput sin;
  sin.manifest = &m;
  sin.store = store;
  sin.probed = &probed;
  sin.now_s = now_s;
  sin.waker = power->waker;
  sin.last_demand = power->idle.LastDemands();  // as of the last round
  sin.progress = progress;
  IdleRoundInput in;
  (*line)["schedule"] = power->schedule.Round(sin, &in.held_up);
  in.manifest = &m;
  in.store = store;
  in.probed = &probed;
  in.checks = &checks;
  in.now_s = now_s;
  in.progress = progress;
  (*line)["idle_off"] = power->idle.Round(in);
}

nlohmann::json Round(const GlobalOptions& g, const WatchOptions& o, int n, Healer* healer,
                     Syncer* syncer, PowerRounds* power) {
  nlohmann::json line = {{"time", Rfc3339Utc(g.clock->WallNow())}, {"round", n}};
  const uint64_t faults_before = OwnFaultCount();
  // Before anything is judged: can the controller open what it needs?
  if (Status headroom = CheckOwnHeadroom(); !headroom.ok())
    return OwnFailure(line, headroom.message());
  // A new commit first: the round then sees what it applied.
  if (syncer != nullptr)
    line["sync"] = syncer->Round([&](const std::string& s) {
      if (g.verbosity > 0) std::cout << s << "\n";
    });
  Manifest m;
  Diagnostics diags;
  if (!LoadManifest(g.dir, &m, &diags)) {
    std::string errors;
    bool own = false;
    for (const Diagnostic& d : diags) {
      errors += d.ToString() + "\n";
      own = own || d.own_fault;
    }
    // A manifest it could not read is not a manifest with errors.
    if (own) return OwnFailure(line, "cannot read the manifests:\n" + errors);
    line["error"] = "the manifests have errors:\n" + errors;
    line["checks"] = nlohmann::json::array();
    return line;
  }
  NodeConnections connections(&m);
  std::unique_ptr<StateStore> store = OpenStateStore(m.state);
  Result<State> state = store->Load();  // read only: no lock
  if (!state.ok() && state.status().own_fault())
    return OwnFailure(line, "cannot read the state: " + state.status().message());
  ProbeResult probed;
  if (state.ok()) {
    line["drift"] = Drift(m, *state, &connections, &probed);
    line["state"] = {{"serial", state->serial}};
    if (!state->synced_commit.empty()) line["state"]["synced_commit"] = state->synced_commit;
    line["nodes"] = NodesOfRound(probed, *state);
    // What each node draws while on (power.watts): the energy figures.
    for (const auto& [name, spec] : m.nodes)
      if (spec.power.watts > 0 && line["nodes"].contains(name))
        line["nodes"][name]["watts"] = spec.power.watts;
    line["serves"] = ServesOfRound(probed, *state);
  } else {
    line["drift"] = {{"error", state.status().message()}};
  }
  line["checks"] = nlohmann::json::array();
  // With the gateways' rows: reported, never healed (no serve is named
  // "gateway NAME" or "DEPLOYMENT via NAME").
  const std::vector<SmokeResult> checks = RunServeChecks(m, &connections, o.addresses, g.clock);
  for (const SmokeResult& r : checks) line["checks"].push_back(r.ToJson());
  // An own failure anywhere in the round (an SSH connect without a socket
  // reads as a dark node, a plan probe as an error): its drift and its
  // serves' states are no evidence, so nothing is healed on them.
  if (const std::string own = OwnFailuresOfRound(faults_before, checks); !own.empty()) {
    line["controller"] = {{"error", own}};
    for (const char* key : {"drift", "nodes", "serves"})
      if (line.contains(key)) {
        line["controller"][key] = line[key];  // kept for the log, judged by nobody
        line.erase(key);
      }
    if (healer != nullptr) line["heal"] = nlohmann::json::array();
    return line;
  }
  if (healer != nullptr) {
    HealRoundInput in;
    in.manifest = &m;
    in.connections = &connections;
    in.store = store.get();
    in.probed = &probed;
    in.checks = &checks;
    in.lock_timeout_ms = int64_t{ParseDurationSeconds(o.lock_timeout, 0).value_or(0)} * 1000;
    in.heal_wait_ms = int64_t{ParseDurationSeconds(o.heal_wait, 0).value_or(30)} * 1000;
    if (g.verbosity > 0) in.progress = [](const std::string& s) { std::cout << s << "\n"; };
    line["heal"] = healer->Round(in);
  }
  // Schedules and idle off come with heal: the manifest's schedule and
  // idle_off are their opt-in.
  if (healer != nullptr && power != nullptr && state.ok())
    PowerRound(g, m, store.get(), probed, checks, power, &line);
  return line;
}

// Creates `path` 0600 (or narrows it to 0600) before a stream appends to
// it: the log holds every check's prompt and reply, like the state.
bool CreatePrivate(const std::string& path) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) return false;
  const bool ok = fchmod(fd, 0600) == 0;
  ::close(fd);
  return ok;
}

// Heal and sync events, loudly: "!!! fleet watch <time> heal
// deployment.a@dgx1: healed (exit), try 1, 2.1 s: container exited ...".
void AnnounceEvent(const nlohmann::json& event) {
  const std::string commit = event.value("commit", "");
  std::cout << "!!! fleet watch " << event.value("time", "") << " " << event.value("event", "")
            << " " << event.value("address", commit.substr(0, 12)) << ": "
            << event.value("outcome", "");
  if (!event.value("reason", "").empty()) std::cout << " (" << event.value("reason", "") << ")";
  if (event.contains("attempt")) std::cout << ", try " << event["attempt"].dump();
  if (event.contains("duration_s")) std::cout << ", " << event["duration_s"].dump() << " s";
  std::cout << ": " << event.value("detail", "") << "\n" << std::flush;
}

void Announce(const nlohmann::json& line, const nlohmann::json& changes) {
  for (const auto& c : changes) {
    std::cout << "!!! fleet watch " << line.value("time", "") << " round " << line.value("round", 0)
              << ": " << c.value("key", "") << " " << c.value("from", "") << " -> "
              << c.value("to", "");
    if (c.contains("detail")) std::cout << ": " << c["detail"].get<std::string>();
    if (c.contains("reply")) std::cout << "\n    reply: " << c["reply"].get<std::string>();
    std::cout << "\n";
  }
  std::cout << std::flush;
}

// SIGINT/SIGTERM are held while a round runs (an SSH read or a request cut
// by EINTR would log a false failure) and taken while it waits.
void HoldSignals(bool hold) {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(hold ? SIG_BLOCK : SIG_UNBLOCK, &set, nullptr);
}

// Sleeps on `clock` until `until`, looking for a signal every 100 ms.
void SleepUntil(Clock* clock, std::chrono::steady_clock::time_point until) {
  HoldSignals(false);
  WaitOnClock(clock, until, [] { return g_stop != 0; });
  HoldSignals(true);
}

// After the last of --rounds: waits for the heals still running and
// records them, their events logged and announced as a round's are.
void DrainHeals(const GlobalOptions& g, const WatchOptions& o, Healer* healer, std::ofstream* log) {
  Manifest m;
  Diagnostics diags;
  if (!LoadManifest(g.dir, &m, &diags)) return;
  std::unique_ptr<StateStore> store = OpenStateStore(m.state);
  HealRoundInput in;
  in.manifest = &m;
  in.store = store.get();
  in.lock_timeout_ms = int64_t{ParseDurationSeconds(o.lock_timeout, 0).value_or(0)} * 1000;
  for (const nlohmann::json& e : healer->Drain(in)) {
    AnnounceEvent(e);
    if (log) *log << e.dump() << "\n" << std::flush;
    if (!o.on_change.empty()) RunOnChange(o.on_change, o.on_change_env, e);
  }
}

}  // namespace

// The round's sync, heal, schedule and idle off events: announced, logged,
// and handed to --on-change.
void ReportRoundEvents(const WatchOptions& o, const nlohmann::json& line, std::ofstream* log) {
  for (const char* kind : {"sync", "heal", "schedule", "idle_off"})
    for (const nlohmann::json& event : line.value(kind, nlohmann::json::array())) {
      AnnounceEvent(event);
      if (log != nullptr) *log << event.dump() << "\n" << std::flush;
      if (!o.on_change.empty()) RunOnChange(o.on_change, o.on_change_env, event);
    }
}

// The wake listener's events since the last round: announced when they
// happen, logged and counted with the next round.
struct WakeEvents {
  std::mutex mu;
  std::vector<nlohmann::json> events;

  void Add(const nlohmann::json& e) {
    std::lock_guard<std::mutex> l(mu);
    events.push_back(e);
  }
  // Into line["wake"] (for the metrics), each also a line of the log.
  void MoveTo(nlohmann::json* line, std::ofstream* log) {
    std::lock_guard<std::mutex> l(mu);
    if (events.empty()) return;
    if (log != nullptr)
      for (const nlohmann::json& e : events) *log << e.dump() << "\n" << std::flush;
    (*line)["wake"] = std::move(events);
    events.clear();
  }
};

// --wake-listen: each event announced at once and appended to the state's
// events. Without the flag nothing listens, and the schedules still wake
// through it.
Status StartWakeListener(const GlobalOptions& g, const WatchOptions& o, WakeListener* listener,
                         WakeEvents* events) {
  WakeListenerOptions wo;
  wo.dir = g.dir;
  wo.clock = g.clock;
  wo.on_event = [events, &g](const nlohmann::json& e) {
    AnnounceEvent(e);
    Manifest m;
    Diagnostics diags;
    if (LoadManifest(g.dir, &m, &diags))
      if (Status s = OpenStateStore(m.state)->AppendEvent(e); !s.ok())
        std::cerr << "fleet watch: cannot record the wake event: " << s.message() << "\n";
    events->Add(e);
  };
  if (g.verbosity > 0) wo.progress = [](const std::string& s) { std::cout << s << "\n"; };
  return listener->Start(o.wake_listen, std::move(wo));
}

int CmdWatch(const GlobalOptions& g, const WatchOptions& o) {
  CatchSignals();
  SetUpLogging(g);  // the probes' timings each round only with -v
  std::ofstream log;
  if (!o.log_file.empty()) {
    if (CreatePrivate(o.log_file)) log.open(o.log_file, std::ios::app);
    if (!log.is_open()) {
      std::cerr << "fleet watch: cannot open " << o.log_file << "\n";
      return 1;
    }
  }
  if (!o.lock_timeout.empty() && !ParseDurationSeconds(o.lock_timeout, 0)) {
    std::cerr << "fleet watch: --lock-timeout " << o.lock_timeout
              << " is not a duration (e.g. 90s, 5m)\n";
    return 1;
  }
  // A soft limit of 1,024 descriptors was all a flood of the metrics port
  // needed to starve the rounds (issue 44).
  const FileLimit limit = RaiseFileLimit();
  if (!limit.error.empty())
    std::cerr << "fleet watch: cannot raise the file descriptor limit: " << limit.error << "\n";
  MetricsServer metrics_server(g.clock);
  if (!o.metrics_listen.empty()) {
    Status s = metrics_server.Start(o.metrics_listen);
    if (!s.ok()) {
      std::cerr << "fleet watch: " << s.message() << "\n";
      return 1;
    }
  }
  WatchMetrics metrics(o.every_s, o.version);
  WatchStates last;
  std::vector<nlohmann::json> lines;  // for --report only: a long watch keeps no history
  Healer healer(o.heal_parallelism);
  PowerRounds power_rounds;
  Syncer syncer(
      g.dir,
      SyncOptions{o.sync_ref, int64_t{ParseDurationSeconds(o.lock_timeout, 0).value_or(0)} * 1000,
                  o.sync_allow_env, o.sync_allowed_signers, o.sync_gpg_keys});
  HoldSignals(true);  // before the wake listener: its threads inherit the mask
  WakeEvents wake_events;
  WakeListener wake_listener;
  if (Status s = StartWakeListener(g, o, &wake_listener, &wake_events); !s.ok()) {
    std::cerr << "fleet watch: " << s.message() << "\n";
    return 1;
  }
  power_rounds.waker = &wake_listener;
  for (int n = 1; !g_stop && (o.rounds == 0 || n <= o.rounds); ++n) {
    const auto start = g.clock->SteadyNow();
    nlohmann::json line =
        Round(g, o, n, o.heal ? &healer : nullptr, o.sync ? &syncer : nullptr, &power_rounds);
    line["duration_s"] = std::chrono::duration<double>(g.clock->SteadyNow() - start).count();
    WatchStates now = WatchStatesOf(line, last);
    const nlohmann::json changes = WatchChanges(last, now);
    last = now;
    line["changes"] = changes;
    int passed = 0, cut = 0;
    for (const auto& c : line["checks"]) {
      passed += c.value("result", "") == "pass";
      cut += c.value("result", "") == "cut";
    }
    std::cout << line.value("time", "") << " round " << n << ": " << passed << " of "
              << line["checks"].size() << " checks passed"
              << (cut > 0 ? " (" + std::to_string(cut) + " cut by max_tokens, not failed)" : "")
              << ", drift " << (line.contains("drift") ? line["drift"].value("changes", 0) : -1);
    if (line.contains("controller"))
      std::cout << "; the controller's own failure, nothing judged: "
                << line["controller"].value("error", "");
    std::cout << "\n" << std::flush;
    if (log) log << line.dump() << "\n" << std::flush;
    if (!changes.empty()) {
      Announce(line, changes);
      if (!o.on_change.empty())
        RunOnChange(o.on_change, o.on_change_env, {{"event", "change"}, {"round", line}});
    }
    wake_events.MoveTo(&line, log ? &log : nullptr);
    ReportRoundEvents(o, line, log ? &log : nullptr);
    metrics.Observe(line);
    if (!o.metrics_listen.empty()) metrics_server.Publish(metrics.Render());
    if (!o.report_file.empty()) {
      lines.push_back(line);
      Status s = WriteWatchReport(lines, o.report_file);
      if (!s.ok()) std::cerr << "fleet watch: " << s.message() << "\n";
    }
    if (o.rounds != 0 && n == o.rounds) break;
    SleepUntil(g.clock, start + std::chrono::seconds(o.every_s));
  }
  HoldSignals(false);
  if (healer.Running() > 0 && g_stop) {
    // A heal waits out a boot of up to health.timeout: a stop does not.
    // Its record says in progress, and the next watch finishes it.
    std::cout << "fleet watch: stopped (signal); " << healer.Running()
              << " heal(s) still running are left to the next watch\n"
              << std::flush;
    if (log) log.flush();
    std::_Exit(0);  // the heals' threads still run: no static destructors
  }
  if (healer.Running() > 0) DrainHeals(g, o, &healer, log ? &log : nullptr);
  std::cout << "fleet watch: stopped" << (g_stop ? " (signal)" : "") << "\n";
  return 0;
}

}  // namespace fleet
