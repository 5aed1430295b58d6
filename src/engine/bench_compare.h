// A `fleet bench` run against another (issue #47): cell by cell (matched by
// depth, concurrency and context), the median of each figure, each delta
// flagged when it is worse than the tolerance allows (a rate lower, a time
// higher); the quality score flagged when fewer items passed. A cell one run
// has and the other does not is listed, never flagged: a profile's change
// is no regression.
#ifndef FLEET_SRC_ENGINE_BENCH_COMPARE_H_
#define FLEET_SRC_ENGINE_BENCH_COMPARE_H_

#include <optional>
#include <string>
#include <vector>

#include "src/engine/bench_stats.h"

namespace fleet {

// A time (TTFT, turn) within this many seconds of the base's is never
// flagged, whatever its percentage: a cached prompt's 50 ms TTFT moves by
// 10% with the scheduling of a busy controller, not with the serve.
inline constexpr double kBenchTimeNoiseS = 0.05;

struct BenchDelta {
  std::string cell;    // BenchCell::Key()
  std::string figure;  // "pp t/s", "tg t/s", "ttft s", "turn s"
  double base = -1, current = -1;
  double change_pct = 0;  // (current - base) / base, in percent
  bool worse = false;     // beyond the tolerance, in the bad direction
};

struct BenchComparison {
  std::vector<BenchDelta> deltas;
  std::vector<std::string> unmatched;         // cells in one run only
  std::string quality_base, quality_current;  // "164/174"; "" when a run has none
  bool quality_worse = false;
  bool Regressed() const;
  // The comparison table: CELL FIGURE BASE NOW CHANGE, a "!" before each
  // delta beyond the tolerance, then a verdict line.
  std::string Render(const std::string& base_id, const std::string& current_id,
                     double tolerance_pct) const;
};

struct QualityCount {
  int passed = 0, total = 0;
};

BenchComparison CompareBench(const std::vector<BenchCell>& base,
                             const std::vector<BenchCell>& current, double tolerance_pct,
                             std::optional<QualityCount> base_quality = std::nullopt,
                             std::optional<QualityCount> current_quality = std::nullopt);

}  // namespace fleet

#endif  // FLEET_SRC_ENGINE_BENCH_COMPARE_H_
