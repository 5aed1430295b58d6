// One `fleet bench` run as it is kept (issue #47): the figures with the
// spec that made them (image digest, model revision, recipe hash, nodes,
// engine args, fleet version, date), so that "is this spec as good as the
// last one?" has an answer. Kept twice: as a state event ("bench", the
// local backend keeps the last 1,000 events, PostgreSQL every one) and as
// reports/<deployment>/<id>.md and .json in the manifests repo, where `id`
// is "<date>_<spec>" (UTC, and the spec hash's first 12 hex digits).
// A run is marked good by a "bench_good" event naming its id.
#ifndef FLEET_SRC_ENGINE_BENCH_RECORD_H_
#define FLEET_SRC_ENGINE_BENCH_RECORD_H_

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "src/engine/bench_compare.h"
#include "src/engine/bench_stats.h"
#include "src/status.h"

namespace fleet {

struct BenchSpec {
  std::string image_ref;  // repo@sha256:…, as pinned
  std::string model_repo, model_revision;
  std::string spec_hash;  // the container spec's hash (recipe, args, env, image, model)
  std::vector<std::string> nodes;
  std::vector<std::string> engine_args;
  std::string fleet_version;
};

struct BenchRecord {
  std::string id;    // "<date>_<spec12>"
  std::string time;  // RFC 3339
  std::string deployment, node, profile, model;
  BenchSpec spec;
  std::vector<BenchCell> cells;
  std::optional<QualityCount> quality;
  std::vector<std::string> quality_failures;
  nlohmann::json harness;  // the external harness's result, or {"error": ...}; null: none declared
  nlohmann::json ToJson() const;
  static Result<BenchRecord> FromJson(const nlohmann::json& j);
  std::string Markdown() const;  // the report: the spec, the table, the quality score
};

// "2026-12-06T03-15-00Z_0123456789ab" from an RFC 3339 time and a spec hash.
std::string BenchRunId(const std::string& time, const std::string& spec_hash);

// Writes reports/<deployment>/<id>.md and .json under `root`.
Status WriteBenchReport(const std::string& root, const BenchRecord& r);

}  // namespace fleet

#endif  // FLEET_SRC_ENGINE_BENCH_RECORD_H_
