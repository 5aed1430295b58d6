#include "src/engine/wake_listener.h"

#include <httplib.h>

#include <cctype>
#include <chrono>
#include <ctime>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "manifests/manifest.h"
#include "src/clock.h"
#include "src/clock_wait.h"
#include "src/engine/commands.h"
#include "src/engine/executor.h"
#include "src/engine/metrics_server.h"
#include "src/engine/node_connections.h"
#include "src/engine/planner.h"
#include "src/engine/wake_policy.h"
#include "src/openai_client.h"
#include "src/power_switch.h"
#include "src/provider.h"
#include "src/transport.h"
#include "state/state.h"
#include "state/state_store.h"

namespace fleet {

// WakeListener::Impl's members: not in the anonymous namespace, which a
// class with external linkage must not hold (-Wsubobject-linkage).
namespace wake_listener_internal {

using WakeClock = std::chrono::steady_clock;

// One wake of one deployment (all its nodes), shared by the requests that
// wait on it.
struct WakeRun {
  WakeTarget target;
  std::string reason;               // what started it: "request" or "schedule"
  WakeClock::time_point started{};  // set by WakeListener::Impl::Join
  std::mutex mu;
  bool done = false;
  bool ok = false;
  std::string cause;  // why it failed
};

// What the wakes of a deployment taught: its failures in a row (for the
// backoff) and how long its last good wake took (the clients' estimate).
struct WakeHistory {
  int failures = 0;
  WakeClock::time_point retry_at{};
  std::string last_cause;
  double last_wake_s = 0;
};

}  // namespace wake_listener_internal

using wake_listener_internal::WakeClock;
using wake_listener_internal::WakeHistory;
using wake_listener_internal::WakeRun;

namespace {

double SecondsSince(Clock* clock, WakeClock::time_point t) {
  return std::chrono::duration<double>(clock->SteadyNow() - t).count();
}

std::string WakeJoined(const std::vector<std::string>& v) {
  std::string s;
  for (const std::string& x : v) s += (s.empty() ? "" : "; ") + x;
  return s;
}

std::string NodeList(const std::vector<std::string>& nodes) {
  std::string s;
  for (const std::string& n : nodes) s += (s.empty() ? "" : "+") + n;
  return s;
}

struct WakeDone {
  bool ok = false;
  std::string cause;
  double power_on_to_ssh_s = -1;  // the node step: switch on, read back, boot, SSH
  double ssh_to_ready_s = -1;     // the rest: display RAM, image, model, serve, health, smoke
};

// After a failed wake: a node whose switch reads on while its SSH stays
// quiet (it did not come back after turn_on: an OS hung in boot) is switched
// off again, read back. It would draw power for nothing, and the next wake's
// turn_on of a relay still on would change nothing: after the cut it is a
// fresh boot. A node that answers by now is left on (idle off takes it down).
// Returns what it did, for the wake's cause ("" when nothing).
std::string PutBackToSleep(const Manifest& m, const std::vector<std::string>& nodes,
                           const ApplyReport& report, PowerSwitch* power,
                           NodeConnections* connections, Clock* clock) {
  std::string did;
  for (const std::string& n : nodes) {
    auto spec = m.nodes.find(n);
    if (power == nullptr || spec == m.nodes.end() || !spec->second.power.present) continue;
    bool node_failed = false;
    for (const std::string& f : report.failed)
      if (f.rfind("node." + n + ": ", 0) == 0) node_failed = true;
    if (!node_failed) continue;
    const std::string& entity = spec->second.power.switch_entity;
    Result<std::string> state = power->GetState(entity);
    if (!state.ok() || *state != "on") continue;  // the switch did not turn on: nothing to cut
    Transport* transport = connections->Get(n);
    if (transport != nullptr && transport->Connect().ok()) continue;
    Status s = power->TurnOff(entity);
    if (s.ok()) s = ConfirmSwitched(power, entity, "off", clock);
    did += (did.empty() ? "" : "; ") +
           (s.ok() ? entity + " switched off again (no SSH: the next try is a fresh boot)"
                   : "switching " + entity + " off again failed: " + s.message());
  }
  return did;
}

// The wake itself: the plan of the deployment with its nodes declared on,
// applied under the state lock as `fleet apply --target` would.
WakeDone DoWake(const std::string& dir, const WakeTarget& t,
                const std::function<void(const std::string&)>& progress, Clock* clock) {
  Manifest m;
  Diagnostics diags;
  if (!LoadManifest(dir, &m, &diags)) return {false, "the manifests have errors (fleet validate)"};
  const Manifest woke = ManifestWithNodesOn(m, t.nodes);
  std::unique_ptr<StateStore> store = OpenStateStore(woke.state);
  // An apply or a heal that holds the state is waited for (the wake then
  // plans what it left: nothing is applied twice), up to the hold.
  Result<std::unique_ptr<StateLock>> lock =
      LockWithTimeout(store.get(), "wake", int64_t{t.hold_s} * 1000, clock);
  if (!lock.ok()) return {false, "the state lock is held: " + lock.status().message()};
  Result<State> state = store->Load();
  if (!state.ok()) return {false, "the state: " + state.status().message()};
  std::vector<std::unique_ptr<Provider>> providers = MakeProviders();
  NodeConnections connections(&woke);
  std::unique_ptr<PowerSwitch> power = MakeDeclaredPowerSwitch(woke.power);
  Planner planner(&woke, &providers, &connections, power.get());
  PlanOptions po;
  // A deployment's serves (and what they need: the nodes' power and display
  // RAM, image, model); a node's own wake, the node and its display RAM.
  for (const DesiredResource& r : planner.Desired())
    if (t.deployment.empty() ? r.address == "node." + t.nodes.front() ||
                                   r.address == "display_ram." + t.nodes.front()
                             : RoleOf(r.type) == Role::kServe && r.name == t.deployment)
      po.targets.push_back(r.address);
  if (po.targets.empty())
    return {false, t.deployment.empty() ? "node " + t.nodes.front() + " is not declared"
                                        : "deployment " + t.deployment + " has no serve to wake"};
  const Plan plan = planner.MakePlan(*state, po);
  if (!plan.errors.empty()) return {false, "plan: " + WakeJoined(DiagnosticLines(plan.errors))};
  WakeDone done;
  done.ok = true;
  if (!plan.HasChanges()) return done;  // awake already (an apply or another wake did it)
  const auto start = clock->SteadyNow();
  std::mutex mu;
  std::optional<WakeClock::time_point> ssh_up;  // a FakeClock may start at time_point{}
  const std::string head = "deployment." + t.deployment + "@" + t.nodes.front() + ": complete";
  Executor executor(
      &woke, &providers, &connections, store.get(), power.get(), [&](const std::string& line) {
        std::lock_guard<std::mutex> l(mu);
        for (const std::string& n : t.nodes)
          if (line.rfind("node." + n + ": complete", 0) == 0) ssh_up = clock->SteadyNow();
        if (line.rfind(head, 0) == 0 && ssh_up) {
          done.power_on_to_ssh_s = std::chrono::duration<double>(*ssh_up - start).count();
          done.ssh_to_ready_s = SecondsSince(clock, *ssh_up);
        }
        if (progress)
          progress("wake " + (t.deployment.empty() ? "node " + t.nodes.front() : t.deployment) +
                   ": " + line);
      });
  executor.set_clock(clock);
  const ApplyReport report = executor.Apply(plan, &state.value(), ApplyOptions{});
  // A node's own wake ends with its display RAM, after SSH came up.
  if (t.deployment.empty() && report.ok() && ssh_up) {
    done.power_on_to_ssh_s = std::chrono::duration<double>(*ssh_up - start).count();
    done.ssh_to_ready_s = SecondsSince(clock, *ssh_up);
  }
  if (!report.ok()) {
    done.ok = false;
    done.cause = WakeJoined(report.failed);
    if (!report.rollback_failed.empty())
      done.cause += "; rollback failed: " + WakeJoined(report.rollback_failed);
    const std::string slept =
        PutBackToSleep(woke, t.nodes, report, power.get(), &connections, clock);
    if (!slept.empty()) done.cause += "; " + slept;
  }
  return done;
}

void Answer503(httplib::Response& res, const std::string& message, const std::string& code,
               int retry_after_s) {
  res.status = 503;
  if (retry_after_s > 0) res.set_header("Retry-After", std::to_string(retry_after_s));
  res.set_content(WakeErrorBody(message, code), "application/json");
}

// RFC 7240 `Prefer: wait=N`: a client that cannot wait the whole hold.
int PreferredWait(const httplib::Request& req, int hold_s) {
  const std::string prefer = req.get_header_value("Prefer");
  const size_t at = prefer.find("wait=");
  if (at == std::string::npos) return hold_s;
  int wait = 0;
  for (size_t i = at + 5; i < prefer.size() && std::isdigit(static_cast<unsigned char>(prefer[i]));
       ++i)
    wait = std::min(wait * 10 + (prefer[i] - '0'), 1000000);
  return std::min(wait, hold_s);
}

}  // namespace

struct WakeListener::Impl {
  WakeListenerOptions options;
  httplib::Server server;
  std::thread thread;
  std::weak_ptr<Impl> self;
  std::mutex mu;                                         // guards runs and history
  std::map<std::string, std::shared_ptr<WakeRun>> runs;  // node -> the wake running there
  std::map<std::string, WakeHistory> history;            // deployment -> its wakes
  std::mutex event_mu;

  void Event(const nlohmann::json& e) {
    std::lock_guard<std::mutex> l(event_mu);
    if (options.on_event) options.on_event(e);
  }

  // The wake running on one of `t`'s nodes, or a new one; nullptr while
  // the deployment's backoff holds (*cause and *retry_s say why and how long).
  std::shared_ptr<WakeRun> Join(const WakeTarget& t, const std::string& reason, std::string* cause,
                                int* retry_s, bool* joined = nullptr) {
    std::lock_guard<std::mutex> l(mu);
    for (const std::string& n : t.nodes)
      if (auto it = runs.find(n); it != runs.end()) {
        if (joined != nullptr) *joined = true;
        return it->second;
      }
    WakeHistory& h = history[WakeAddress(t)];
    const WakeClock::time_point now = options.clock->SteadyNow();
    if (h.failures > 0 && now < h.retry_at) {
      *cause = h.last_cause;
      *retry_s =
          static_cast<int>(std::chrono::ceil<std::chrono::seconds>(h.retry_at - now).count());
      return nullptr;
    }
    auto run = std::make_shared<WakeRun>();
    run->target = t;
    run->reason = reason;
    run->started = now;
    for (const std::string& n : t.nodes) runs[n] = run;
    std::shared_ptr<Impl> keep = self.lock();
    std::thread([keep, run] { keep->Run(run); }).detach();
    return run;
  }

  void Run(const std::shared_ptr<WakeRun>& run) {
    const WakeTarget& t = run->target;
    if (options.progress)
      options.progress("wake: powering on " + NodeList(t.nodes) +
                       (t.model.empty() ? "" : " for " + t.model) + " (" + run->reason + ")");
    const WakeDone done = DoWake(options.dir, t, options.progress, options.clock);
    const double took = SecondsSince(options.clock, run->started);
    {
      std::lock_guard<std::mutex> l(mu);
      for (const std::string& n : t.nodes) runs.erase(n);
      WakeHistory& h = history[WakeAddress(t)];
      if (done.ok) {
        h.failures = 0;
        h.last_wake_s = took;
      } else {
        ++h.failures;
        h.last_cause = done.cause;
        h.retry_at = options.clock->SteadyNow() + std::chrono::seconds(WakeBackoffSeconds(
                                                      h.failures, t.backoff_s, t.max_backoff_s));
      }
    }
    {
      std::lock_guard<std::mutex> l(run->mu);
      run->done = true;
      run->ok = done.ok;
      run->cause = done.cause;
    }
    nlohmann::json e = {{"event", "wake"},
                        {"time", NowRfc3339()},
                        {"address", WakeAddress(t)},
                        {"nodes", t.nodes},
                        {"outcome", done.ok ? "woken" : "failed"},
                        {"reason", run->reason},
                        {"duration_s", took},
                        {"detail", done.ok ? "" : done.cause}};
    if (t.deployment.empty()) {
      e["node"] = t.nodes.front();  // a node's own wake: no model, no deployment
    } else {
      e["model"] = t.model;
      e["deployment"] = t.deployment;
    }
    if (done.power_on_to_ssh_s >= 0)
      e["parts"] = {{"power_on_to_ssh_s", done.power_on_to_ssh_s},
                    {"ssh_to_ready_s", done.ssh_to_ready_s}};
    Event(e);
  }

  // The serve's answer to the held request, as the gateway would have
  // sent it had the serve been up.
  void Forward(const WakeTarget& t, const httplib::Request& req, httplib::Response& res) {
    httplib::Client client(t.head_host, t.head_port);
    client.set_connection_timeout(10, 0);
    client.set_read_timeout(1800, 0);
    httplib::Headers headers;
    for (const char* name : {"Authorization", "Accept"})
      if (req.has_header(name)) headers.emplace(name, req.get_header_value(name));
    const std::string type = req.get_header_value("Content-Type");
    httplib::Result r = req.method == "GET" ? client.Get(req.path, headers)
                                            : client.Post(req.path, headers, req.body,
                                                          type.empty() ? "application/json" : type);
    if (!r) {
      Answer503(res,
                t.deployment + " on " + t.nodes.front() +
                    " woke, but did not answer: " + httplib::to_string(r.error()),
                "model_unavailable", 5);
      return;
    }
    res.status = r->status;
    res.set_content(r->body, r->get_header_value("Content-Type").empty()
                                 ? "application/json"
                                 : r->get_header_value("Content-Type"));
  }

  void Handle(const httplib::Request& req, httplib::Response& res) {
    const auto arrived = options.clock->SteadyNow();
    const std::string model = RequestModel(req.body);
    nlohmann::json e = {{"event", "wake_request"}, {"time", NowRfc3339()}, {"model", model}};
    auto refuse = [&](const std::string& message, const std::string& code, int retry_s) {
      Answer503(res, message, code, retry_s);
      e["outcome"] = "refused";
      e["wait_s"] = SecondsSince(options.clock, arrived);
      e["detail"] = message;
      Event(e);
    };
    Manifest m;
    Diagnostics diags;
    if (!LoadManifest(options.dir, &m, &diags))
      return refuse("fleet cannot read its manifests; nothing was woken", "model_unavailable", 60);
    const std::optional<WakeTarget> target = WakeTargetFor(m, model);
    if (target) e["address"] = WakeAddress(*target);
    if (!target)
      return refuse("no serve of model '" + model + "' can be woken (none on an on_demand node)",
                    "model_unavailable", 0);
    const std::string what = NodeList(target->nodes) + " for " + model;
    if (req.has_header(kFleetOwnHeader))
      return refuse(model + " is asleep on " + NodeList(target->nodes) +
                        "; fleet's own checks do not wake it",
                    "model_asleep", 0);
    std::string cause;
    int retry_s = 0;
    const std::shared_ptr<WakeRun> run = Join(*target, "request", &cause, &retry_s);
    if (run == nullptr)
      return refuse(
          "waking " + what + " failed: " + cause + "; next try in " + RoughDuration(retry_s),
          "model_wake_failed", retry_s);
    const int wait_s = PreferredWait(req, target->hold_s);
    // On the listener's clock (a condition variable's deadline would be
    // read on the machine's, whatever clock was handed down).
    WaitOnClock(options.clock, arrived + std::chrono::seconds(wait_s), [&] {
      std::lock_guard<std::mutex> l(run->mu);
      return run->done;
    });
    {
      std::unique_lock<std::mutex> l(run->mu);
      if (!run->done) {
        double estimate = 0;
        {
          std::lock_guard<std::mutex> h(mu);
          estimate = history[WakeAddress(*target)].last_wake_s;
        }
        const int left = std::max(5, static_cast<int>((estimate > 0 ? estimate : target->hold_s) -
                                                      SecondsSince(options.clock, run->started)));
        l.unlock();
        return refuse("waking " + what + ": " + RoughDuration(left), "model_waking", left);
      }
      if (!run->ok) {
        l.unlock();
        std::lock_guard<std::mutex> h(mu);
        retry_s = std::max(1, static_cast<int>(std::chrono::ceil<std::chrono::seconds>(
                                                   history[WakeAddress(*target)].retry_at -
                                                   options.clock->SteadyNow())
                                                   .count()));
        cause = run->cause;
      }
    }
    if (!cause.empty())
      return refuse(
          "waking " + what + " failed: " + cause + "; next try in " + RoughDuration(retry_s),
          "model_wake_failed", retry_s);
    Forward(*target, req, res);
    res.set_header("x-fleet-woken", what);
    e["outcome"] = "answered";
    e["status"] = res.status;
    e["wait_s"] = SecondsSince(options.clock, arrived);
    e["detail"] = "by the serve (HTTP " + std::to_string(res.status) + ") after " +
                  std::to_string(static_cast<int>(SecondsSince(options.clock, arrived) + 0.5)) +
                  " s";
    Event(e);
  }
};

WakeListener::WakeListener() : impl_(std::make_shared<Impl>()) { impl_->self = impl_; }

WakeListener::~WakeListener() {
  if (!impl_->thread.joinable()) return;
  impl_->server.stop();
  impl_->thread.join();
}

WakeStart WakeListener::Wake(const WakeTarget& target, const std::string& reason) {
  WakeStart out;
  const std::shared_ptr<WakeRun> run =
      impl_->Join(target, reason, &out.backoff_cause, &out.retry_s, &out.joined);
  out.running = run != nullptr;
  return out;
}

Status WakeListener::Start(const std::string& listen, WakeListenerOptions options) {
  if (listen.empty()) {
    impl_->options = std::move(options);
    return Status::OK();
  }
  std::string host;
  int port = 0;
  if (!ParseMetricsListen(listen, &host, &port))
    return Status::Error("--wake-listen " + listen +
                         ": expected ADDR:PORT or PORT (e.g. 10.0.0.1:9101)");
  Impl* impl = impl_.get();
  impl->options = std::move(options);
  impl->server.new_task_queue = [] { return new httplib::ThreadPool(kMaxHeld); };
  impl->server.set_read_timeout(30, 0);
  impl->server.set_write_timeout(60, 0);
  impl->server.set_payload_max_length(uint64_t{128} << 20);  // the largest max_request
  auto handle = [impl](const httplib::Request& req, httplib::Response& res) {
    impl->Handle(req, res);
  };
  impl->server.Post(R"(/v1/.*)", handle);
  if (!impl->server.bind_to_port(host, port))
    return Status::Error("--wake-listen " + listen +
                         ": cannot listen there (in use, or not an address of this machine)");
  impl->thread = std::thread([impl] { impl->server.listen_after_bind(); });
  return Status::OK();
}

}  // namespace fleet
