#include "src/engine/watch_metrics.h"

#include <charconv>
#include <ctime>
#include <utility>
#include <vector>

namespace fleet {
namespace {

using Labels = std::vector<std::pair<std::string, std::string>>;
using nlohmann::json;

// A label value as the text format wants it: \\, \" and \n escaped.
std::string Escaped(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

// The shortest text that reads back as `v` (Prometheus parses Go floats).
std::string Number(double v) {
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  return ec == std::errc() ? std::string(buf, end) : "NaN";
}

// One family: HELP, TYPE, then its samples.
class Family {
 public:
  Family(std::string* out, const std::string& name, const char* type, const char* help)
      : out_(out), name_(name) {
    *out_ += "# HELP " + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
  }
  void Add(const Labels& labels, double value) { AddAs(name_, labels, value); }
  // A sample named otherwise: a histogram's _bucket, _sum and _count.
  void AddAs(const std::string& name, const Labels& labels, double value) {
    *out_ += name;
    if (!labels.empty()) {
      *out_ += "{";
      for (size_t i = 0; i < labels.size(); ++i)
        *out_ += (i ? "," : "") + labels[i].first + "=\"" + Escaped(labels[i].second) + "\"";
      *out_ += "}";
    }
    *out_ += " " + Number(value) + "\n";
  }

 private:
  std::string* out_;
  std::string name_;
};

// "2026-12-03T20:00:00Z" -> unix seconds; 0 when it does not parse.
double UnixSeconds(const std::string& iso) {
  std::tm tm{};
  if (strptime(iso.c_str(), "%Y-%m-%dT%H:%M:%SZ", &tm) == nullptr) return 0;
  return static_cast<double>(timegm(&tm));
}

// Upper bounds of the wake request histogram's buckets, in seconds: a
// wake is a boot of minutes on a GB10, up to wake.hold (1 h at most).
constexpr double kWakeRequestBuckets[] = {1, 5, 10, 30, 60, 120, 300, 600, 1800, 3600};

double Bool(const json& j, const char* key) { return j.value(key, false) ? 1 : 0; }

Labels CheckLabels(const json& c) {
  return {{"deployment", c.value("deployment", "")},
          {"node", c.value("node", "")},
          {"check", c.value("check", "")}};
}

void NodeFamilies(const json& nodes, std::string* out) {
  Family up(out, "fleet_node_up", "gauge", "1 when the round's probe reached the node over SSH.");
  for (const auto& [node, n] : nodes.items()) up.Add({{"node", node}}, Bool(n, "up"));
  Family power(out, "fleet_node_power_on", "gauge",
               "1 when the node answers, or else when the state records it powered on.");
  for (const auto& [node, n] : nodes.items()) power.Add({{"node", node}}, Bool(n, "power_on"));
  Family display(out, "fleet_node_display_ram_unlocked", "gauge",
                 "1 when nvidia_drm runs with modeset=1 fbdev=0 (display RAM freed for CUDA).");
  for (const auto& [node, n] : nodes.items())
    if (n.contains("display_ram_unlocked") && n["display_ram_unlocked"].is_boolean())
      display.Add({{"node", node}}, Bool(n, "display_ram_unlocked"));
  const struct {
    const char* name;
    const char* key;
    const char* help;
  } memory[] = {
      {"fleet_node_gpu_memory_free_bytes", "memory_free_bytes",
       "GPU memory free, as the round's probe read it (no CUDA context while serves run)."},
      {"fleet_node_gpu_memory_total_bytes", "memory_total_bytes", "GPU memory in all."},
  };
  for (const auto& m : memory) {
    Family f(out, m.name, "gauge", m.help);
    for (const auto& [node, n] : nodes.items())
      for (const json& g : n.value("gpus", json::array()))
        if (g.contains(m.key))
          f.Add({{"node", node}, {"gpu", std::to_string(g.value("index", 0))}},
                g[m.key].get<double>());
  }
}

void ServeFamilies(const json& serves, std::string* out) {
  Family up(out, "fleet_deployment_up", "gauge",
            "1 when the serve's container runs and its health URL answered this round.");
  for (const json& s : serves)
    up.Add({{"deployment", s.value("deployment", "")}, {"node", s.value("node", "")}},
           Bool(s, "up"));
  Family q(out, "fleet_deployment_quarantined", "gauge",
           "1 when fleet watch --heal gave up on the serve until an apply or fleet heal reset.");
  for (const json& s : serves)
    q.Add({{"deployment", s.value("deployment", "")}, {"node", s.value("node", "")}},
          Bool(s, "quarantined"));
}

void CheckFamilies(const json& checks, std::string* out) {
  Family ok(out, "fleet_smoke_check_success", "gauge", "1 when the smoke check passed this round.");
  // An unchecked row (the controller's own failure) says nothing either way:
  // no sample, rather than a 0 that pages someone about a healthy serve.
  for (const json& c : checks)
    if (c.value("result", "") != "unchecked")
      ok.Add(CheckLabels(c), c.value("result", "") == "pass" ? 1 : 0);
  const struct {
    const char* name;
    const char* key;
    const char* help;
  } figures[] = {
      {"fleet_smoke_check_ttft_seconds", "ttft_s", "Time to the reply's first token."},
      {"fleet_smoke_check_decode_tokens_per_second", "tps",
       "Reply tokens per second after the first."},
      {"fleet_smoke_check_duration_seconds", "wall_s", "The check's wall time."},
      {"fleet_smoke_check_min_decode_tokens_per_second", "min_decode_tps",
       "The check's declared decode floor (min_decode_tps)."},
      {"fleet_smoke_check_max_ttft_seconds", "max_ttft_s",
       "The check's declared TTFT ceiling (max_ttft)."},
  };
  for (const auto& f : figures) {
    Family fam(out, f.name, "gauge", f.help);
    for (const json& c : checks)
      if (c.contains(f.key) && c[f.key].is_number())
        fam.Add(CheckLabels(c), c[f.key].get<double>());
  }
}

void PlanFamilies(const json& line, std::string* out) {
  const json drift = line.value("drift", json::object());
  Family changes(out, "fleet_plan_changes", "gauge",
                 "Changes the round's plan found (drift from the manifests), by kind.");
  const json kinds = drift.value("kinds", json::object());
  for (const char* kind : {"add", "change", "replace", "destroy"})
    changes.Add({{"kind", kind}}, kinds.value(kind, 0));
  Family errors(out, "fleet_plan_errors", "gauge", "Errors the round's plan (or manifests) had.");
  errors.Add({}, static_cast<double>(drift.value("errors", json::array()).size()) +
                     (line.contains("error") || drift.contains("error") ? 1 : 0));
}

}  // namespace

WatchMetrics::WatchMetrics(int interval_s, std::string version)
    : interval_s_(interval_s), version_(std::move(version)) {}

void WatchMetrics::Observe(const json& line) {
  last_ = line;
  ++rounds_;
  if (line.contains("controller")) {
    ++own_failure_rounds_;
    // What the round could not see is what the round before saw.
    for (const char* key : {"checks", "nodes", "serves", "drift", "state"})
      if (!line.contains(key) && previous_.contains(key)) last_[key] = previous_[key];
  }
  previous_ = last_;
  for (const json& e : line.value("heal", json::array()))
    ++heals_[{e.value("deployment", ""), e.value("node", ""), e.value("outcome", "")}];
  for (const json& e : line.value("wake", json::array())) {
    if (e.value("event", "") == "wake_request" && e.value("outcome", "") == "answered") {
      Histogram& h = wake_requests_[e.value("model", "")];
      const double s = e.value("wait_s", 0.0);
      h.buckets.resize(std::size(kWakeRequestBuckets));
      for (size_t i = 0; i < h.buckets.size(); ++i) h.buckets[i] += s <= kWakeRequestBuckets[i];
      ++h.count;
      h.sum += s;
    }
    if (e.value("event", "") != "wake") continue;  // a request's event is not a wake
    // A node's own wake (its schedule, no serve on it) names the node alone.
    const bool own = e.contains("node") && !e.contains("deployment");
    const std::pair<std::string, std::string> k{e.value(own ? "node" : "deployment", ""),
                                                e.value("outcome", "")};
    ++(own ? node_wakes_ : wakes_)[k];
    (own ? node_wake_seconds_ : wake_seconds_)[k] += e.value("duration_s", 0.0);
  }
  for (const json& e : line.value("idle_off", json::array()))
    ++idle_offs_[{e.value("node", ""), e.value("outcome", "")}];
  // A node's own schedule's decisions carry "node" (and the deployment it
  // brings up, if any): counted by node, not by deployment.
  for (const json& e : line.value("schedule", json::array())) {
    if (e.contains("node"))
      ++node_schedules_[{e.value("node", ""), e.value("outcome", "")}];
    else
      ++schedules_[{e.value("deployment", ""), e.value("outcome", "")}];
  }
  // Energy: each node's state at a round holds until the next round.
  const double round_time = UnixSeconds(line.value("time", ""));
  if (last_round_time_ > 0 && round_time > last_round_time_)
    for (const auto& [node, n] : last_nodes_.items()) {
      const double dt = round_time - last_round_time_;
      const double watts = n.value("watts", 0.0);
      const bool up = n.value("up", false);
      (up ? on_seconds_ : off_seconds_)[node] += dt;
      if (watts > 0) (up ? kwh_ : saved_kwh_)[node] += dt * watts / 3.6e6;
    }
  if (round_time > 0) last_round_time_ = round_time;
  if (line.contains("nodes") && line["nodes"].is_object()) last_nodes_ = line["nodes"];
  std::map<CheckKey, uint64_t> now;
  for (const json& c : line.value("checks", json::array())) {
    CheckKey k{c.value("deployment", ""), c.value("node", ""), c.value("check", "")};
    const std::string result = c.value("result", "");
    // A reply cut by max_tokens is not a failure (smoke_check.h).
    now[k] = result == "pass" || result == "cut" ? 0
             : result == "unchecked"             ? failures_in_row_[k]
                                                 : failures_in_row_[k] + 1;
  }
  failures_in_row_ = std::move(now);  // a check no longer run is forgotten
}

// Wakes, schedules, idle off, hours on and energy: the families of power
// following demand.
void WatchMetrics::PowerFamilies(std::string* out) const {
  Family wakes(out, "fleet_wake_total", "counter",
               "Wakes of a sleeping deployment by fleet watch --wake-listen, by outcome "
               "(woken, failed).");
  for (const auto& [k, n] : wakes_)
    wakes.Add({{"deployment", k.first}, {"outcome", k.second}}, static_cast<double>(n));
  Family wake_s(out, "fleet_wake_seconds_total", "counter",
                "Seconds those wakes took, from the first request to the serve ready.");
  for (const auto& [k, s] : wake_seconds_)
    wake_s.Add({{"deployment", k.first}, {"outcome", k.second}}, s);
  Family node_wakes(out, "fleet_node_wake_total", "counter",
                    "Wakes of a sleeping node that holds no serve, by its own schedule, by node "
                    "and outcome (woken, failed).");
  for (const auto& [k, n] : node_wakes_)
    node_wakes.Add({{"node", k.first}, {"outcome", k.second}}, static_cast<double>(n));
  Family node_wake_s(out, "fleet_node_wake_seconds_total", "counter",
                     "Seconds those wakes took, from the switch call to the node's display RAM "
                     "as declared.");
  for (const auto& [k, s] : node_wake_seconds_)
    node_wake_s.Add({{"node", k.first}, {"outcome", k.second}}, s);
  Family waited(out, "fleet_wake_request_seconds", "histogram",
                "Requests a wake held and answered, by model: seconds from the request to the "
                "answer's first byte.");
  for (const auto& [model, h] : wake_requests_) {
    for (size_t i = 0; i < h.buckets.size(); ++i)
      waited.AddAs("fleet_wake_request_seconds_bucket",
                   {{"model", model}, {"le", Number(kWakeRequestBuckets[i])}},
                   static_cast<double>(h.buckets[i]));
    waited.AddAs("fleet_wake_request_seconds_bucket", {{"model", model}, {"le", "+Inf"}},
                 static_cast<double>(h.count));
    waited.AddAs("fleet_wake_request_seconds_sum", {{"model", model}}, h.sum);
    waited.AddAs("fleet_wake_request_seconds_count", {{"model", model}},
                 static_cast<double>(h.count));
  }
  Family schedules(out, "fleet_schedule_total", "counter",
                   "Schedule window decisions by deployment and outcome (waking, backing_off, "
                   "powered_off, kept, left_on, failed).");
  for (const auto& [k, n] : schedules_)
    schedules.Add({{"deployment", k.first}, {"outcome", k.second}}, static_cast<double>(n));
  Family node_schedules(out, "fleet_node_schedule_total", "counter",
                        "Decisions of a node's own schedule window by node and outcome (waking, "
                        "backing_off, powered_off, kept, left_on, failed).");
  for (const auto& [k, n] : node_schedules_)
    node_schedules.Add({{"node", k.first}, {"outcome", k.second}}, static_cast<double>(n));
  Family idle(out, "fleet_idle_off_total", "counter",
              "Idle off decisions by node and outcome (powered_off, kept, failed).");
  for (const auto& [k, n] : idle_offs_)
    idle.Add({{"node", k.first}, {"outcome", k.second}}, static_cast<double>(n));
  Family on(out, "fleet_node_on_seconds_total", "counter",
            "Seconds the node answered SSH since the watch started (each round's state held "
            "until the next).");
  for (const auto& [node, sec] : on_seconds_) on.Add({{"node", node}}, sec);
  Family off(out, "fleet_node_off_seconds_total", "counter",
             "Seconds the node did not answer SSH (off or asleep) since the watch started.");
  for (const auto& [node, sec] : off_seconds_) off.Add({{"node", node}}, sec);
  Family energy(out, "fleet_node_energy_kwh_total", "counter",
                "kWh the node drew while on, from its power.watts.");
  for (const auto& [node, k] : kwh_) energy.Add({{"node", node}}, k);
  Family saved(out, "fleet_node_energy_saved_kwh_total", "counter",
               "kWh the node did not draw while off or asleep, against being on all the time "
               "(power.watts).");
  for (const auto& [node, k] : saved_kwh_) saved.Add({{"node", node}}, k);
}

std::string WatchMetrics::Render() const {
  if (rounds_ == 0) return "";
  std::string out;
  NodeFamilies(last_.value("nodes", json::object()), &out);
  ServeFamilies(last_.value("serves", json::array()), &out);
  Family heals(&out, "fleet_heal_total", "counter",
               "fleet watch --heal events since the watch started, by outcome.");
  for (const auto& [k, n] : heals_)
    heals.Add(
        {{"deployment", std::get<0>(k)}, {"node", std::get<1>(k)}, {"outcome", std::get<2>(k)}},
        static_cast<double>(n));
  PowerFamilies(&out);
  CheckFamilies(last_.value("checks", json::array()), &out);
  Family in_row(&out, "fleet_smoke_check_consecutive_failures", "gauge",
                "Rounds in a row the smoke check did not pass.");
  for (const auto& [k, n] : failures_in_row_)
    in_row.Add(
        {{"deployment", std::get<0>(k)}, {"node", std::get<1>(k)}, {"check", std::get<2>(k)}},
        static_cast<double>(n));
  PlanFamilies(last_, &out);
  Family duration(&out, "fleet_watch_round_duration_seconds", "gauge",
                  "The last round's wall time.");
  duration.Add({}, last_.value("duration_s", 0.0));
  Family at(&out, "fleet_watch_last_round_timestamp_seconds", "gauge",
            "Unix time the last round ended.");
  at.Add({}, UnixSeconds(last_.value("time", "")) + last_.value("duration_s", 0.0));
  Family own(&out, "fleet_watch_own_failure_rounds_total", "counter",
             "Rounds in which the controller itself failed (no file descriptor, its own "
             "network): nothing was healed or counted as drift on them.");
  own.Add({}, static_cast<double>(own_failure_rounds_));
  Family every(&out, "fleet_watch_interval_seconds", "gauge", "The watch's --every.");
  every.Add({}, interval_s_);
  Family rounds(&out, "fleet_watch_rounds_total", "counter", "Rounds since the watch started.");
  rounds.Add({}, static_cast<double>(rounds_));
  const json state = last_.value("state", json::object());
  Family serial(&out, "fleet_state_serial", "gauge", "The state's serial, as the round read it.");
  if (state.contains("serial")) serial.Add({}, state["serial"].get<double>());
  Family sync(&out, "fleet_sync_info", "gauge",
              "The manifests commit fleet watch --sync applied last (value 1).");
  if (!state.value("synced_commit", "").empty()) sync.Add({{"commit", state["synced_commit"]}}, 1);
  Family build(&out, "fleet_build_info", "gauge", "fleet's version (value 1).");
  build.Add({{"version", version_}}, 1);
  return out;
}

}  // namespace fleet
