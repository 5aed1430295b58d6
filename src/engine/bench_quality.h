// The quality set of `fleet bench` (issue #47): prompts with expected
// answers, scored "N/M" like the operator's "Bench: 161/176". The built-in
// items are the smoke checks' kinds (math, a capital, a tool call, a
// needle), each run and judged by RunOneCheck exactly as a smoke check is;
// an operator's own items come from a JSONL file in the manifests repo,
// one {"prompt": ..., "expected": ...} a line ("expected": text the reply
// must contain, case-insensitive; "expect": a regular expression instead;
// "name": optional). The identity of the serve (the smoke checks' identity
// and model steps) is checked before any item runs: a score of someone
// else's serve would be worse than none.
#ifndef FLEET_SRC_ENGINE_BENCH_QUALITY_H_
#define FLEET_SRC_ENGINE_BENCH_QUALITY_H_

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "manifests/manifest.h"
#include "src/clock.h"
#include "src/status.h"

namespace fleet {

struct QualityScore {
  int passed = 0;
  int total = 0;
  std::vector<std::string> failures;  // "math2: fail: expected 11303, got ..."
  std::string Text() const { return std::to_string(passed) + "/" + std::to_string(total); }
  nlohmann::json ToJson() const;
};

// The built-in items, as smoke checks.
std::vector<SmokeCheck> BuiltinQualitySet();

// The operator's items from `text` (the JSONL file's contents); `file` names
// it in errors ("quality/lab.jsonl:3: ..."). Blank lines and lines starting
// with '#' are skipped.
Result<std::vector<SmokeCheck>> ParseQualityJsonl(const std::string& file, const std::string& text);

// Runs `items` against the serve, one at a time, and scores them; their
// times are read from `clock`.
QualityScore RunQualitySet(const std::string& base_url, const std::string& model,
                           const std::vector<SmokeCheck>& items, Clock* clock);

}  // namespace fleet

#endif  // FLEET_SRC_ENGINE_BENCH_QUALITY_H_
