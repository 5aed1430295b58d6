// The benchmark profiles of `fleet bench` (issue #47): each a sweep of
// prompt depths x concurrencies x fresh vs prefix-cached contexts, the cells
// of the operator's llama-benchy tables. Two are built in (`quick`, small
// enough to run in seconds, and `full`, the log's 0/4K/32K/128K x c1/c2/c4);
// fleet.yaml may name more, or replace a built-in one, under
//
//   bench:
//     profiles:
//       nightly: {depths: [0, 4096, 32768], concurrency: [1, 2], contexts: [fresh, cached],
//                 requests: 3, max_tokens: 128}
//     quality: quality/lab.jsonl
//
// Errors name file:line:column. The manifest loader validates the block
// (fleet validate, plan) without keeping it: only `fleet bench` reads it,
// through LoadBenchSettings.
#ifndef FLEET_MANIFESTS_BENCH_SCHEMA_H_
#define FLEET_MANIFESTS_BENCH_SCHEMA_H_

#include <map>
#include <string>
#include <vector>

#include "manifests/diagnostic.h"
#include "manifests/yaml_schema.h"

namespace fleet {

struct BenchProfile {
  std::string name;
  std::vector<int> depths;       // prompt tokens before the question; 0: the question alone
  std::vector<int> concurrency;  // requests in flight at once
  bool fresh = true;             // cells whose every prompt no cache holds
  bool cached = true;            // cells whose prompt the engine saw just before
  int requests = 2;              // rounds per cell; a round is `concurrency` requests
  int max_tokens = 64;           // tokens each request decodes (the tg length)
};

struct BenchSettings {
  std::map<std::string, BenchProfile> profiles;  // the built-in ones, then fleet.yaml's
  std::string quality_file;  // an operator's JSONL of {prompt, expected}, repo-relative; "" none
  // An external harness (tool-eval-bench, llama-benchy): a command run on
  // the controller with FLEET_BENCH_URL and FLEET_BENCH_MODEL set, whose
  // stdout is one JSON object ({"score": "161/176"} or {"passed": N,
  // "total": M}). "" when none is declared.
  std::string harness;
};

// `quick` and `full`.
std::map<std::string, BenchProfile> BuiltinBenchProfiles();

// Reads the `bench` block under `entry` into `out` (which holds the
// built-in profiles already; a profile of the same name replaces one).
// Problems go to `reporter`; a bad profile is left out.
void ReadBenchSettings(yaml_schema::Reporter* reporter, const yaml_schema::Entry& entry,
                       BenchSettings* out);

// `<dir>/fleet.yaml`'s bench block with the built-in profiles. False, with
// `diags` filled, when the block has errors.
bool LoadBenchSettings(const std::string& dir, BenchSettings* out, Diagnostics* diags);

}  // namespace fleet

#endif  // FLEET_MANIFESTS_BENCH_SCHEMA_H_
