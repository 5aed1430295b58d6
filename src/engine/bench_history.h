// What `fleet bench` and the gate (issue #47) share: the bench runs kept in
// the state (every "bench" event's record, and the "bench_good" marks), a
// run found by id (state, else the repo's reports/), the last good run of a
// deployment; a profile and quality set made ready from fleet.yaml's bench
// block; one run measured against a serve; a run kept (state event and
// report) and marked good.
#ifndef FLEET_SRC_ENGINE_BENCH_HISTORY_H_
#define FLEET_SRC_ENGINE_BENCH_HISTORY_H_

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "manifests/bench_schema.h"
#include "manifests/manifest.h"
#include "src/engine/bench_record.h"
#include "src/engine/bench_run.h"
#include "src/status.h"
#include "state/state_store.h"

namespace fleet {

// Every kept bench record, oldest first, and the ids marked good per
// deployment (the last mark wins).
struct BenchHistory {
  std::vector<BenchRecord> runs;
  std::vector<std::string> outcomes;        // runs[i]'s, as kept ("gate refused", ...)
  std::map<std::string, std::string> good;  // deployment -> run id
  const BenchRecord* Find(const std::string& id) const;
};

// The runs from the store's bench history (AppendBenchRun), then those of
// its "bench" events it does not hold (kept by a fleet before the table);
// the good marks from the "bench_good" events.
Result<BenchHistory> ReadBenchHistory(StateStore* store);

// A run by id: from the history, else from `root`'s reports/ (the local
// state keeps the last 1,000 events; the reports stay in git).
std::optional<BenchRecord> FindBenchRun(const std::string& root, const std::string& id,
                                        const BenchHistory& h);

// The run last marked good for `deployment`, if any.
std::optional<BenchRecord> LastGoodRun(const std::string& root, const std::string& deployment,
                                       const BenchHistory& h);

// What a run needs: the profile named `profile`, and (with `quality`) the
// quality set, the built-in items then the operator's JSONL. An error says
// what is wrong (no such profile, with the nearest name).
struct BenchPlan {
  BenchSettings settings;
  BenchProfile profile;
  std::vector<SmokeCheck> quality_items;
};
Result<BenchPlan> PrepareBench(const std::string& root, const std::string& profile, bool quality);

// Measures `rec` (whose id, deployment, node, profile and model are set):
// the cells, the quality set, the external harness. `log` gets one line per
// cell and step (nullptr: quiet).
void MeasureBench(const BenchPlan& plan, const std::string& base_url, BenchRecord* rec,
                  const std::function<void(const std::string&)>& log);

// Keeps `rec`: a "bench" state event (outcome: "recorded", "ok",
// "regressed", "gate passed", "gate refused") and its report under `root`.
Status KeepBenchRun(StateStore* store, const std::string& root, const BenchRecord& rec,
                    const std::string& outcome);

// A "bench_good" event: `rec` is the deployment's good run from now on.
Status MarkBenchGood(StateStore* store, const BenchRecord& rec, const std::string& by);

// "fleet-bench: cell 3/8 d2048/c1/fresh ttft 1.68 s, ..." for a terminal.
std::string BenchCellLine(const BenchCell& c, int index, int total);

}  // namespace fleet

#endif  // FLEET_SRC_ENGINE_BENCH_HISTORY_H_
