// `fleet bench` (issue #47): a serve's perf table and quality score,
// recorded with the spec that made them and compared with the deployment's
// last good run.
//
//   fleet bench deployment.NAME[@NODE] [--profile quick] [--mark-good]
//   fleet bench --compare A B
//
// A run: the smoke checks' identity and model steps (the serve reached is
// the deployment's), the profile's cells (bench_run.h), the quality set
// (bench_quality.h), the external harness when `bench.harness` declares
// one; then the record (bench_record.h) into the state's events and the
// repo's reports/, and the comparison with the last run marked good.
// Exit 1 when the serve could not be benched, a request failed, or the run
// is worse than the last good one beyond the tolerance.
#ifndef FLEET_SRC_ENGINE_BENCH_COMMAND_H_
#define FLEET_SRC_ENGINE_BENCH_COMMAND_H_

#include <string>
#include <vector>

#include "src/engine/commands.h"

namespace fleet {

struct BenchOptions {
  std::string address;  // deployment.NAME[@NODE]
  std::string profile = "quick";
  bool json = false;
  bool quality = true;  // --no-quality leaves the quality set out
  bool mark_good = false;
  double tolerance_pct = 10;
  std::vector<std::string> compare;  // --compare A B: two run ids
  std::string version;               // fleet's, recorded with each run
};

int CmdBench(const GlobalOptions& g, const BenchOptions& o);

}  // namespace fleet

#endif  // FLEET_SRC_ENGINE_BENCH_COMMAND_H_
