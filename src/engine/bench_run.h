// Runs a benchmark profile (manifests/bench_schema.h) against one serve's
// OpenAI API, through the smoke checks' client (src/openai_client.h), cell
// by cell: for each depth, each concurrency, fresh then cached contexts.
//
// A fresh cell's every request is a prompt no cache holds (FreshContextPrompt:
// a new random text each); a cached cell's prompt is sent once unmeasured
// (the warm-up that fills the prefix cache) and then `requests` rounds of
// the same prompt, `concurrency` at once. A depth of 0 is the question
// alone, still with a fresh session id in the fresh cells.
#ifndef FLEET_SRC_ENGINE_BENCH_RUN_H_
#define FLEET_SRC_ENGINE_BENCH_RUN_H_

#include <functional>
#include <string>
#include <vector>

#include "manifests/bench_schema.h"
#include "src/engine/bench_stats.h"

namespace fleet {

// Called once a cell is measured: "cell 3/8 d2048/c2/fresh: ...".
using BenchProgress = std::function<void(const BenchCell& cell, int index, int total)>;

std::vector<BenchCell> RunBenchProfile(const std::string& base_url, const std::string& model,
                                       const BenchProfile& profile, const BenchProgress& progress);

}  // namespace fleet

#endif  // FLEET_SRC_ENGINE_BENCH_RUN_H_
