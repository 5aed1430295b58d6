// `fleet watch --metrics-listen`: the Prometheus text exposition format
// (0.0.4) of what the last round saw. Built only from the rounds' JSON
// lines (round_facts.h fills their "nodes" and "serves"), so a scrape and
// the watch log agree, and a scrape never probes. Names follow
// Prometheus's naming guide: base units in the name, `_total` counters.
#ifndef FLEET_SRC_ENGINE_WATCH_METRICS_H_
#define FLEET_SRC_ENGINE_WATCH_METRICS_H_

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <tuple>
#include <vector>

namespace fleet {

class WatchMetrics {
 public:
  // `interval_s`: the watch's --every; `version`: fleet's (fleet_build_info).
  WatchMetrics(int interval_s, std::string version);

  // Takes one round's line (with its "heal", "wake", "schedule" and "idle_off"
  // events): the gauges become the line's, the counters (rounds, heals,
  // wakes, idle offs, failures in a row) advance.
  void Observe(const nlohmann::json& line);

  // Every family with HELP and TYPE, "" before the first round.
  std::string Render() const;

 private:
  void PowerFamilies(std::string* out) const;
  using CheckKey = std::tuple<std::string, std::string, std::string>;  // deployment, node, check
  int interval_s_;
  std::string version_;
  nlohmann::json last_;
  nlohmann::json previous_;  // last_ as rendered, for a round the controller failed
  uint64_t rounds_ = 0;
  uint64_t own_failure_rounds_ = 0;
  std::map<std::tuple<std::string, std::string, std::string>, uint64_t> heals_;
  std::map<CheckKey, uint64_t> failures_in_row_;
  // The wake listener's and idle off's events (issue #46): wakes by
  // deployment and outcome with their seconds (a node's own wakes, by node
  // and outcome, apart), idle decisions by node and outcome.
  std::map<std::pair<std::string, std::string>, uint64_t> wakes_;
  std::map<std::pair<std::string, std::string>, double> wake_seconds_;
  std::map<std::pair<std::string, std::string>, uint64_t> node_wakes_;
  std::map<std::pair<std::string, std::string>, double> node_wake_seconds_;
  std::map<std::pair<std::string, std::string>, uint64_t> idle_offs_;
  // Schedule decisions by deployment and outcome; those of a node's own
  // schedule by node and outcome.
  std::map<std::pair<std::string, std::string>, uint64_t> schedules_;
  std::map<std::pair<std::string, std::string>, uint64_t> node_schedules_;
  // Requests a wake held and answered, by model: request to the answer's
  // first byte (the listener sends the serve's answer in one piece), as a
  // histogram (cumulative counts per bucket, kWakeRequestBuckets).
  struct Histogram {
    std::vector<uint64_t> buckets;
    uint64_t count = 0;
    double sum = 0;
  };
  std::map<std::string, Histogram> wake_requests_;
  // Seconds each node was seen up (held from one round to the next), and
  // with power.watts the energy it drew and that it saved against being on
  // all the time, in kWh.
  double last_round_time_ = 0;
  nlohmann::json last_nodes_ = nlohmann::json::object();
  std::map<std::string, double> on_seconds_, off_seconds_, kwh_, saved_kwh_;
};

}  // namespace fleet

#endif  // FLEET_SRC_ENGINE_WATCH_METRICS_H_
