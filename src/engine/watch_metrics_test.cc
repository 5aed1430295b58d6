#include "src/engine/watch_metrics.h"

#include <gtest/gtest.h>

namespace fleet {
namespace {

nlohmann::json Line(const std::string& math_result) {
  return nlohmann::json::parse(R"({
    "time": "2026-12-03T20:00:00Z", "round": 1, "duration_s": 2.5,
    "state": {"serial": 7, "synced_commit": "abc123"},
    "nodes": {"dgx1": {"up": true, "power_on": true, "display_ram_unlocked": true,
                       "gpus": [{"index": 0, "memory_free_bytes": 1000, "memory_total_bytes": 4000}]},
              "dgx2": {"up": false, "power_on": true, "display_ram_unlocked": null, "gpus": []}},
    "serves": [{"deployment": "q", "node": "dgx1", "up": true, "quarantined": false}],
    "drift": {"changes": 1, "kinds": {"add": 0, "change": 1, "replace": 0, "destroy": 0}, "errors": []},
    "checks": [{"deployment": "q", "node": "dgx1", "check": "math", "result": ")" +
                               math_result + R"(",
                "ttft_s": 0.25, "tps": 42.5, "wall_s": 1.5, "min_decode_tps": 40}],
    "heal": [{"event": "heal", "deployment": "q", "node": "dgx1", "outcome": "healed"}]
  })");
}

bool Has(const std::string& text, const std::string& line) {
  return text.find("\n" + line + "\n") != std::string::npos;
}

TEST(WatchMetrics, NothingBeforeTheFirstRound) {
  WatchMetrics m(60, "0.1.0");
  EXPECT_EQ(m.Render(), "");
}

TEST(WatchMetrics, GaugesAreTheLastRoundsAndEachFamilyHasHelpAndType) {
  WatchMetrics m(60, "0.1.0");
  m.Observe(Line("pass"));
  const std::string t = m.Render();
  EXPECT_TRUE(Has(t, R"(fleet_node_up{node="dgx1"} 1)")) << t;
  EXPECT_TRUE(Has(t, R"(fleet_node_up{node="dgx2"} 0)"));
  EXPECT_TRUE(Has(t, R"(fleet_node_power_on{node="dgx2"} 1)"));
  EXPECT_TRUE(Has(t, R"(fleet_node_display_ram_unlocked{node="dgx1"} 1)"));
  EXPECT_EQ(t.find(R"(fleet_node_display_ram_unlocked{node="dgx2"})"), std::string::npos);
  EXPECT_TRUE(Has(t, R"(fleet_node_gpu_memory_free_bytes{node="dgx1",gpu="0"} 1000)"));
  EXPECT_TRUE(Has(t, R"(fleet_node_gpu_memory_total_bytes{node="dgx1",gpu="0"} 4000)"));
  EXPECT_TRUE(Has(t, R"(fleet_deployment_up{deployment="q",node="dgx1"} 1)"));
  EXPECT_TRUE(Has(t, R"(fleet_deployment_quarantined{deployment="q",node="dgx1"} 0)"));
  EXPECT_TRUE(Has(t, R"(fleet_smoke_check_success{deployment="q",node="dgx1",check="math"} 1)"));
  EXPECT_TRUE(
      Has(t, R"(fleet_smoke_check_ttft_seconds{deployment="q",node="dgx1",check="math"} 0.25)"));
  EXPECT_TRUE(Has(
      t,
      R"(fleet_smoke_check_decode_tokens_per_second{deployment="q",node="dgx1",check="math"} 42.5)"));
  EXPECT_TRUE(Has(
      t,
      R"(fleet_smoke_check_min_decode_tokens_per_second{deployment="q",node="dgx1",check="math"} 40)"));
  EXPECT_TRUE(Has(t, R"(fleet_plan_changes{kind="change"} 1)"));
  EXPECT_TRUE(Has(t, R"(fleet_plan_changes{kind="add"} 0)"));
  EXPECT_TRUE(Has(t, "fleet_watch_round_duration_seconds 2.5"));
  EXPECT_TRUE(Has(t, "fleet_watch_last_round_timestamp_seconds 1796328002.5"));
  EXPECT_TRUE(Has(t, "fleet_watch_interval_seconds 60"));
  EXPECT_TRUE(Has(t, "fleet_state_serial 7"));
  EXPECT_TRUE(Has(t, R"(fleet_sync_info{commit="abc123"} 1)"));
  EXPECT_TRUE(Has(t, R"(fleet_build_info{version="0.1.0"} 1)"));
  // Every sample's family was announced first.
  size_t pos = 0;
  while ((pos = t.find('\n', pos)) != std::string::npos && pos + 1 < t.size()) {
    const std::string rest = t.substr(pos + 1);
    ++pos;
    if (rest[0] == '#') continue;
    const std::string name = rest.substr(0, rest.find_first_of("{ "));
    EXPECT_NE(t.find("# TYPE " + name + " "), std::string::npos) << name;
    EXPECT_NE(t.find("# HELP " + name + " "), std::string::npos) << name;
  }
}

TEST(WatchMetrics, CountersAdvanceAndFailuresInARowResetOnAPass) {
  WatchMetrics m(60, "0.1.0");
  m.Observe(Line("fail"));
  m.Observe(Line("fail"));
  std::string t = m.Render();
  EXPECT_TRUE(Has(
      t, R"(fleet_smoke_check_consecutive_failures{deployment="q",node="dgx1",check="math"} 2)"))
      << t;
  EXPECT_TRUE(Has(t, R"(fleet_smoke_check_success{deployment="q",node="dgx1",check="math"} 0)"));
  EXPECT_TRUE(Has(t, R"(fleet_heal_total{deployment="q",node="dgx1",outcome="healed"} 2)"));
  EXPECT_TRUE(Has(t, "fleet_watch_rounds_total 2"));
  m.Observe(Line("pass"));
  t = m.Render();
  EXPECT_TRUE(Has(
      t, R"(fleet_smoke_check_consecutive_failures{deployment="q",node="dgx1",check="math"} 0)"));
  EXPECT_TRUE(Has(t, "fleet_watch_rounds_total 3"));
}

TEST(WatchMetrics, WakesAndIdleOffsAreCountedByOutcome) {
  WatchMetrics m(60, "0.1.0");
  nlohmann::json line = Line("pass");
  line["wake"] = nlohmann::json::parse(R"([
    {"event": "wake_request", "deployment": "b", "outcome": "answered"},
    {"event": "wake", "deployment": "b", "outcome": "woken", "duration_s": 40.5},
    {"event": "wake", "deployment": "b", "outcome": "failed", "duration_s": 5}])");
  line["idle_off"] =
      nlohmann::json::parse(R"([{"event": "idle_off", "node": "dgx3", "outcome": "powered_off"}])");
  m.Observe(line);
  line["wake"][1]["duration_s"] = 20;
  m.Observe(line);
  const std::string t = m.Render();
  EXPECT_TRUE(Has(t, R"(fleet_wake_total{deployment="b",outcome="woken"} 2)")) << t;
  EXPECT_TRUE(Has(t, R"(fleet_wake_total{deployment="b",outcome="failed"} 2)")) << t;
  EXPECT_TRUE(Has(t, R"(fleet_wake_seconds_total{deployment="b",outcome="woken"} 60.5)")) << t;
  EXPECT_TRUE(Has(t, R"(fleet_idle_off_total{node="dgx3",outcome="powered_off"} 2)")) << t;
  EXPECT_EQ(t.find("outcome=\"answered\""), std::string::npos);  // a request, not a wake
}

TEST(WatchMetrics, WakeRequestsAreAHistogramAndScheduleDecisionsACounter) {
  WatchMetrics m(60, "0.1.0");
  nlohmann::json line = Line("pass");
  line["wake"] = nlohmann::json::parse(R"([
    {"event": "wake_request", "model": "beta", "outcome": "answered", "wait_s": 12.5},
    {"event": "wake_request", "model": "beta", "outcome": "answered", "wait_s": 4},
    {"event": "wake_request", "model": "beta", "outcome": "refused", "wait_s": 1}])");
  line["schedule"] = nlohmann::json::parse(
      R"([{"event": "schedule", "deployment": "b", "outcome": "powered_off"}])");
  m.Observe(line);
  const std::string t = m.Render();
  EXPECT_TRUE(Has(t, "# TYPE fleet_wake_request_seconds histogram")) << t;
  EXPECT_TRUE(Has(t, R"(fleet_wake_request_seconds_bucket{model="beta",le="1"} 0)")) << t;
  EXPECT_TRUE(Has(t, R"(fleet_wake_request_seconds_bucket{model="beta",le="5"} 1)")) << t;
  EXPECT_TRUE(Has(t, R"(fleet_wake_request_seconds_bucket{model="beta",le="30"} 2)")) << t;
  EXPECT_TRUE(Has(t, R"(fleet_wake_request_seconds_bucket{model="beta",le="+Inf"} 2)")) << t;
  EXPECT_TRUE(Has(t, R"(fleet_wake_request_seconds_sum{model="beta"} 16.5)")) << t;
  EXPECT_TRUE(Has(t, R"(fleet_wake_request_seconds_count{model="beta"} 2)")) << t;
  EXPECT_TRUE(Has(t, R"(fleet_schedule_total{deployment="b",outcome="powered_off"} 1)")) << t;
}

// A node's own schedule decides for the node (and may bring a deployment up
// on it); its take-down and its wake of a node without a serve name no
// deployment: they are counted by node, never under deployment="".
TEST(WatchMetrics, ANodesOwnScheduleAndWakeAreCountedByNode) {
  WatchMetrics m(60, "0.1.0");
  nlohmann::json line = Line("pass");
  line["schedule"] = nlohmann::json::parse(R"([
    {"event": "schedule", "node": "dgx3", "nodes": ["dgx3"], "outcome": "powered_off"},
    {"event": "schedule", "node": "dgx3", "nodes": ["dgx3"], "outcome": "waking"},
    {"event": "schedule", "node": "dgx4", "deployment": "b", "outcome": "waking"},
    {"event": "schedule", "deployment": "b", "nodes": ["dgx4"], "outcome": "waking"}])");
  line["wake"] = nlohmann::json::parse(R"([
    {"event": "wake", "node": "dgx3", "nodes": ["dgx3"], "outcome": "woken",
     "reason": "schedule", "duration_s": 7.5},
    {"event": "wake", "deployment": "b", "model": "beta", "nodes": ["dgx4"],
     "outcome": "woken", "reason": "schedule", "duration_s": 30}])");
  m.Observe(line);
  const std::string t = m.Render();
  EXPECT_TRUE(Has(t, R"(fleet_node_schedule_total{node="dgx3",outcome="powered_off"} 1)")) << t;
  EXPECT_TRUE(Has(t, R"(fleet_node_schedule_total{node="dgx3",outcome="waking"} 1)")) << t;
  EXPECT_TRUE(Has(t, R"(fleet_node_schedule_total{node="dgx4",outcome="waking"} 1)")) << t;
  EXPECT_TRUE(Has(t, R"(fleet_schedule_total{deployment="b",outcome="waking"} 1)")) << t;
  EXPECT_TRUE(Has(t, R"(fleet_node_wake_total{node="dgx3",outcome="woken"} 1)")) << t;
  EXPECT_TRUE(Has(t, R"(fleet_node_wake_seconds_total{node="dgx3",outcome="woken"} 7.5)")) << t;
  EXPECT_TRUE(Has(t, R"(fleet_wake_total{deployment="b",outcome="woken"} 1)")) << t;
  EXPECT_TRUE(Has(t, "# TYPE fleet_node_schedule_total counter")) << t;
  EXPECT_EQ(t.find(R"(deployment="")"), std::string::npos) << t;
}

// The value of the sample `series` ("name{labels}") in `text`; -1 if none.
double Sample(const std::string& text, const std::string& series) {
  const size_t at = text.find("\n" + series + " ");
  return at == std::string::npos ? -1 : std::stod(text.substr(at + series.size() + 2));
}

TEST(WatchMetrics, HoursOnAndEnergyFromTheDeclaredWatts) {
  WatchMetrics m(60, "0.1.0");
  nlohmann::json line = Line("pass");
  line["nodes"]["dgx2"]["watts"] = 240;
  line["nodes"]["dgx1"]["watts"] = 100;
  m.Observe(line);  // 20:00: dgx1 up, dgx2 down
  line["time"] = "2026-12-03T21:00:00Z";
  line["nodes"]["dgx2"]["up"] = true;
  m.Observe(line);  // an hour later: dgx1 was on, dgx2 off
  line["time"] = "2026-12-03T21:30:00Z";
  m.Observe(line);  // half an hour more: both on
  const std::string t = m.Render();
  EXPECT_DOUBLE_EQ(Sample(t, R"(fleet_node_on_seconds_total{node="dgx1"})"), 5400) << t;
  EXPECT_DOUBLE_EQ(Sample(t, R"(fleet_node_on_seconds_total{node="dgx2"})"), 1800) << t;
  EXPECT_DOUBLE_EQ(Sample(t, R"(fleet_node_off_seconds_total{node="dgx2"})"), 3600) << t;
  EXPECT_NEAR(Sample(t, R"(fleet_node_energy_kwh_total{node="dgx1"})"), 0.15, 1e-9) << t;
  EXPECT_NEAR(Sample(t, R"(fleet_node_energy_kwh_total{node="dgx2"})"), 0.12, 1e-9) << t;
  EXPECT_NEAR(Sample(t, R"(fleet_node_energy_saved_kwh_total{node="dgx2"})"), 0.24, 1e-9) << t;
}

TEST(WatchMetrics, LabelValuesAreEscaped) {
  WatchMetrics m(60, "1.0 \"x\\y\"\nz");
  m.Observe(Line("pass"));
  EXPECT_TRUE(Has(m.Render(), R"(fleet_build_info{version="1.0 \"x\\y\"\nz"} 1)")) << m.Render();
}

}  // namespace
}  // namespace fleet
