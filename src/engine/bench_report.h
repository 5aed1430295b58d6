// `fleet report --bench` (issue #47): the bench history drawn per
// deployment and per spec, oldest first, as the operator read the night's
// llama-benchy and tool-eval-bench results side by side: each run's date,
// id, outcome (a gate's too), the log's summary line, the quality score,
// and a bar of its decode rate against the deployment's best, so that a
// spec 30% slower shows at a glance; the run marked good is starred.
#ifndef FLEET_SRC_ENGINE_BENCH_REPORT_H_
#define FLEET_SRC_ENGINE_BENCH_REPORT_H_

#include <map>
#include <string>
#include <vector>

#include "src/engine/bench_record.h"
#include "src/engine/commands.h"

namespace fleet {

// One kept run and the outcome it was kept with ("recorded", "gate
// refused", ...).
struct BenchHistoryRun {
  BenchRecord record;
  std::string outcome;
};

// The history of `runs` (oldest first), of `deployment` only when it is not
// empty; `good` maps a deployment to its good run's id.
std::string RenderBenchHistory(const std::vector<BenchHistoryRun>& runs,
                               const std::map<std::string, std::string>& good,
                               const std::string& deployment);

// fleet report --bench [--deployment NAME]: the history the state keeps.
int CmdBenchReport(const GlobalOptions& g, const std::string& deployment);

}  // namespace fleet

#endif  // FLEET_SRC_ENGINE_BENCH_REPORT_H_
