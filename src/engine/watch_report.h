// The picture of a watch: one self-contained HTML page (inline SVG drawn by
// inline JS from the rounds embedded as JSON; no network) with, per serve,
// latency, time to first token (a fresh-context check's fresh and cached
// TTFT) and decode tokens/s of each check over time, the checks' speed
// floors (max_ttft, min_decode_tps) drawn as levels, failures marked in red
// with their sample a click away, and the rounds with plan drift marked.
#ifndef FLEET_SRC_ENGINE_WATCH_REPORT_H_
#define FLEET_SRC_ENGINE_WATCH_REPORT_H_

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "src/status.h"

namespace fleet {

// The page for `rounds` (the JSON lines of a watch log).
std::string WatchReportHtml(const std::vector<nlohmann::json>& rounds);

// Writes it to `path` (through a temp file and a rename).
Status WriteWatchReport(const std::vector<nlohmann::json>& rounds, const std::string& path);

// The rounds of a watch log; lines that are not JSON objects are skipped.
Result<std::vector<nlohmann::json>> ReadWatchLog(const std::string& path);

}  // namespace fleet

#endif  // FLEET_SRC_ENGINE_WATCH_REPORT_H_
