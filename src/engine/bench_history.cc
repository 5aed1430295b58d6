#include "src/engine/bench_history.h"

#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "src/engine/bench_quality.h"
#include "src/shell_quote.h"
#include "state/state.h"

namespace fleet {

const BenchRecord* BenchHistory::Find(const std::string& id) const {
  for (const BenchRecord& r : runs)
    if (r.id == id) return &r;
  return nullptr;
}

Result<BenchHistory> ReadBenchHistory(StateStore* store) {
  Result<std::vector<nlohmann::json>> kept = store->BenchRuns("");
  if (!kept.ok()) return kept.status();
  Result<std::vector<nlohmann::json>> events = store->Events("");
  if (!events.ok()) return events.status();
  BenchHistory h;
  std::set<std::string> ids;
  auto add = [&](const nlohmann::json& record, const std::string& outcome) {
    Result<BenchRecord> r = BenchRecord::FromJson(record);
    if (!r.ok() || !ids.insert(r->id).second) return;
    h.runs.push_back(std::move(r).value());
    h.outcomes.push_back(outcome);
  };
  for (const nlohmann::json& run : *kept)
    if (run.contains("record")) add(run["record"], run.value("outcome", ""));
  for (const nlohmann::json& e : *events) {
    const std::string kind = e.value("event", "");
    if (kind == "bench" && e.contains("record")) {
      add(e["record"], e.value("outcome", ""));
    } else if (kind == "bench_good" && e.contains("deployment") && e.contains("run")) {
      h.good[e.value("deployment", "")] = e.value("run", "");
    }
  }
  // Oldest first: the table's runs and the events' older ones together.
  std::vector<size_t> order(h.runs.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return h.runs[a].time < h.runs[b].time; });
  BenchHistory sorted;
  sorted.good = std::move(h.good);
  for (size_t i : order) {
    sorted.runs.push_back(std::move(h.runs[i]));
    sorted.outcomes.push_back(std::move(h.outcomes[i]));
  }
  return sorted;
}

std::optional<BenchRecord> FindBenchRun(const std::string& root, const std::string& id,
                                        const BenchHistory& h) {
  if (const BenchRecord* r = h.Find(id)) return *r;
  namespace fs = std::filesystem;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(fs::path(root) / "reports", ec), end; !ec && it != end;
       it.increment(ec)) {
    if (it->path().filename() != id + ".json") continue;
    std::ifstream in(it->path());
    const nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
    Result<BenchRecord> r = BenchRecord::FromJson(j);
    if (r.ok()) return std::move(r).value();
  }
  return std::nullopt;
}

std::optional<BenchRecord> LastGoodRun(const std::string& root, const std::string& deployment,
                                       const BenchHistory& h) {
  auto good = h.good.find(deployment);
  if (good == h.good.end()) return std::nullopt;
  return FindBenchRun(root, good->second, h);
}

Result<BenchPlan> PrepareBench(const std::string& root, const std::string& profile, bool quality) {
  BenchPlan plan;
  Diagnostics diags;
  if (!LoadBenchSettings(root, &plan.settings, &diags)) {
    std::string all;
    for (const Diagnostic& d : diags) all += (all.empty() ? "" : "\n") + d.ToString();
    return Status::Error(all);
  }
  auto found = plan.settings.profiles.find(profile);
  if (found == plan.settings.profiles.end()) {
    std::vector<std::string> names;
    for (const auto& [name, _] : plan.settings.profiles) names.push_back(name);
    const std::string near = NearestName(profile, names);
    std::string all;
    for (const std::string& n : names) all += (all.empty() ? "" : ", ") + n;
    return Status::Error("no bench profile '" + profile + "'" +
                         (near.empty() ? "" : "; did you mean '" + near + "'?") +
                         " (profiles: " + all + ")");
  }
  plan.profile = found->second;
  if (!quality) return plan;
  plan.quality_items = BuiltinQualitySet();
  if (plan.settings.quality_file.empty()) return plan;
  std::ifstream in(std::filesystem::path(root) / plan.settings.quality_file);
  if (!in) return Status::Error("cannot read bench.quality " + plan.settings.quality_file);
  std::stringstream text;
  text << in.rdbuf();
  Result<std::vector<SmokeCheck>> own = ParseQualityJsonl(plan.settings.quality_file, text.str());
  if (!own.ok()) return own.status();
  for (const SmokeCheck& c : *own) plan.quality_items.push_back(c);
  return plan;
}

namespace {

// The external harness: `command` run by sh with the serve's URL and model
// in its environment; its stdout is one JSON object. Not installed (sh's
// 127) is a message, not a failure.
nlohmann::json RunHarness(const std::string& command, const std::string& url,
                          const std::string& model) {
  const std::string line = "FLEET_BENCH_URL=" + ShellQuote(url) +
                           " FLEET_BENCH_MODEL=" + ShellQuote(model) + " " + command +
                           " 2>/dev/null";
  FILE* p = popen(line.c_str(), "r");
  if (p == nullptr) return {{"error", "could not start: " + command}};
  std::string out;
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
  const int status = pclose(p);
  const int rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  if (rc == 127)
    return {{"error", "the external harness '" + command +
                          "' is not installed (command not found); the built-in bench ran "
                          "without it"}};
  const nlohmann::json j = nlohmann::json::parse(out, nullptr, false);
  if (rc != 0 || j.is_discarded() || !j.is_object())
    return {{"error", "the external harness '" + command + "' exited " + std::to_string(rc) +
                          (j.is_discarded() || !j.is_object() ? " without a JSON object" : "")}};
  return j;
}

}  // namespace

std::string BenchCellLine(const BenchCell& c, int index, int total) {
  char line[200];
  std::snprintf(line, sizeof line,
                "cell %d/%d %-18s ttft %.3f s, pp %.0f t/s, tg %.1f t/s, %d/%d ok", index, total,
                c.Key().c_str(), c.ttft_s.median, c.prefill_tps.median, c.decode_tps.median,
                c.requests - c.failed, c.requests);
  return line;
}

void MeasureBench(const BenchPlan& plan, const std::string& base_url, BenchRecord* rec,
                  const std::function<void(const std::string&)>& log) {
  auto say = [&](const std::string& line) {
    if (log) log(line);
  };
  say("bench " + rec->id + ": deployment." + rec->deployment + "@" + rec->node + " (" + base_url +
      "), profile " + rec->profile);
  rec->cells = RunBenchProfile(
      base_url, rec->model, plan.profile,
      [&](const BenchCell& c, int i, int total) { say("  " + BenchCellLine(c, i, total)); });
  if (!plan.quality_items.empty()) {
    say("  quality set: " + std::to_string(plan.quality_items.size()) + " items");
    // On the real clock, as the profile's cells are timed (the client's own).
    const QualityScore q = RunQualitySet(base_url, rec->model, plan.quality_items, RealClock());
    rec->quality = QualityCount{q.passed, q.total};
    rec->quality_failures = q.failures;
  }
  if (!plan.settings.harness.empty()) {
    say("  external harness: " + plan.settings.harness);
    rec->harness = RunHarness(plan.settings.harness, base_url, rec->model);
  }
}

Status KeepBenchRun(StateStore* store, const std::string& root, const BenchRecord& rec,
                    const std::string& outcome) {
  // The address, outcome and detail are what `fleet events` shows of it.
  const std::string address = "deployment." + rec.deployment + "@" + rec.node;
  std::string detail = rec.id + " " + rec.profile + ": " + BenchSummaryLine(rec.cells);
  if (rec.quality)
    detail += ", quality " + std::to_string(rec.quality->passed) + "/" +
              std::to_string(rec.quality->total);
  Status kept = store->AppendEvent({{"time", rec.time},
                                    {"event", "bench"},
                                    {"address", address},
                                    {"outcome", outcome},
                                    {"detail", detail},
                                    {"deployment", rec.deployment},
                                    {"node", rec.node},
                                    {"record", rec.ToJson()}});
  if (kept.ok())
    kept = store->AppendBenchRun({{"id", rec.id},
                                  {"time", rec.time},
                                  {"deployment", rec.deployment},
                                  {"node", rec.node},
                                  {"profile", rec.profile},
                                  {"outcome", outcome},
                                  {"record", rec.ToJson()}});
  if (!kept.ok()) kept = kept.Prefixed("the bench record was not kept in the state");
  Status written = WriteBenchReport(root, rec);
  return kept.ok() ? written : kept;
}

Status MarkBenchGood(StateStore* store, const BenchRecord& rec, const std::string& by) {
  return store->AppendEvent({{"time", NowRfc3339()},
                             {"event", "bench_good"},
                             {"address", "deployment." + rec.deployment + "@" + rec.node},
                             {"outcome", "marked good"},
                             {"detail", rec.id + (by.empty() ? "" : " (" + by + ")")},
                             {"deployment", rec.deployment},
                             {"run", rec.id}});
}

}  // namespace fleet
