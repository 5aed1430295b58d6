// The figures of a `fleet bench` cell (issue #47): what each request of the
// cell measured, and their median and p95, as the operator's llama-benchy
// tables give them (pp t/s: prompt tokens over the time to the first token;
// tg t/s: decode tokens/s once the first token came).
#ifndef FLEET_SRC_ENGINE_BENCH_STATS_H_
#define FLEET_SRC_ENGINE_BENCH_STATS_H_

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace fleet {

// One request of a cell. A request that failed counts in `failed`, not in
// the figures: a timeout measured as a TTFT would hide the failure in a
// median.
struct BenchSample {
  bool ok = false;
  std::string error;       // why it failed
  int prompt_tokens = 0;   // as the engine counted them (else ~chars/4)
  double ttft_s = -1;      // to the first token
  double decode_tps = -1;  // -1 with fewer than 2 tokens
  double turn_s = -1;      // the whole request
};

// The median and p95 of one figure; -1 for both when nothing was measured.
struct Spread {
  double median = -1;
  double p95 = -1;
};

// Linear interpolation between the closest ranks (numpy's default), so
// that two samples' p95 lies between them rather than on the slower one.
// -1 for an empty list; `q` in [0, 1].
double Quantile(std::vector<double> values, double q);
Spread SpreadOf(const std::vector<double>& values);

struct BenchCell {
  int depth = 0;  // the profile's depth (requested tokens of context)
  int concurrency = 1;
  bool fresh = true;      // fresh context, else prefix-cached
  int requests = 0;       // all sent
  int failed = 0;         // of them, failed
  int prompt_tokens = 0;  // the median request's prompt, as counted by the engine
  Spread ttft_s, prefill_tps, decode_tps, turn_s;
  std::string first_error;  // a sample, when some failed
  std::string Key() const;  // "d2048/c2/fresh": what comparisons match on
  nlohmann::json ToJson() const;
  static BenchCell FromJson(const nlohmann::json& j);
};

// The cell's figures from its samples. Prefill t/s is each request's prompt
// tokens over its TTFT (a cached prompt's TTFT is short, its rate high: the
// log's "fresh vs cached" gap in one column).
BenchCell Summarize(int depth, int concurrency, bool fresh,
                    const std::vector<BenchSample>& samples);

// The llama-benchy table: one row per cell, "| model | test | c | t/s |
// ttft | turn |" with pp and tg rows, median (p95) each; and a one-line
// summary like the log's "pp 1,886-2,103 t/s, tg 66-100 t/s (c1/c2),
// median turn 2.2 s".
std::string RenderBenchTable(const std::string& model, const std::vector<BenchCell>& cells);
std::string BenchSummaryLine(const std::vector<BenchCell>& cells);

}  // namespace fleet

#endif  // FLEET_SRC_ENGINE_BENCH_STATS_H_
