#include "src/engine/bench_command.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>

#include "manifests/bench_schema.h"
#include "providers/deployment/smoke_check.h"
#include "src/engine/bench_compare.h"
#include "src/engine/bench_quality.h"
#include "src/engine/bench_record.h"
#include "src/engine/bench_run.h"
#include "src/engine/node_connections.h"
#include "src/engine/serve_checks.h"

namespace fleet {
namespace {

// Every kept bench record, oldest first, and the ids marked good per
// deployment (the last mark wins).
struct BenchHistory {
  std::vector<BenchRecord> runs;
  std::map<std::string, std::string> good;  // deployment -> run id
  const BenchRecord* Find(const std::string& id) const {
    for (const BenchRecord& r : runs)
      if (r.id == id) return &r;
    return nullptr;
  }
};

Result<BenchHistory> ReadHistory(StateStore* store) {
  Result<std::vector<nlohmann::json>> events = store->Events("");
  if (!events.ok()) return events.status();
  BenchHistory h;
  for (const nlohmann::json& e : *events) {
    const std::string kind = e.value("event", "");
    if (kind == "bench" && e.contains("record")) {
      Result<BenchRecord> r = BenchRecord::FromJson(e["record"]);
      if (r.ok()) h.runs.push_back(std::move(r).value());
    } else if (kind == "bench_good" && e.contains("deployment") && e.contains("run")) {
      h.good[e.value("deployment", "")] = e.value("run", "");
    }
  }
  return h;
}

// A run by id: from the state's events, else from the repo's reports (the
// state keeps the last 1,000 events; the reports stay in git).
std::optional<BenchRecord> FindRun(const std::string& root, const std::string& id,
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

std::optional<QualityCount> Quality(const BenchRecord& r) { return r.quality; }

int Compare(const GlobalOptions& g, const Manifest& m, const BenchOptions& o) {
  std::unique_ptr<StateStore> store = OpenStateStore(m.state);
  Result<BenchHistory> h = ReadHistory(store.get());
  if (!h.ok()) {
    std::cerr << "fleet: bench history: " << h.status().message() << "\n";
    return 1;
  }
  const std::optional<BenchRecord> a = FindRun(g.dir, o.compare[0], *h);
  const std::optional<BenchRecord> b = FindRun(g.dir, o.compare[1], *h);
  for (const auto& [run, id] : {std::pair{&a, o.compare[0]}, std::pair{&b, o.compare[1]}}) {
    if (!run->has_value()) {
      std::cerr << "fleet: no bench run '" << id
                << "' in the state's events or the repo's reports/ (ids look like "
                   "2026-12-06T03-15-00Z_0123456789ab)\n";
      return 1;
    }
  }
  const BenchComparison c =
      CompareBench(a->cells, b->cells, o.tolerance_pct, Quality(*a), Quality(*b));
  std::cout << c.Render(a->id, b->id, o.tolerance_pct);
  return c.Regressed() ? 1 : 0;
}

// The external harness: `command` run by sh with the serve's URL and model
// in its environment; its stdout is one JSON object. Not installed (sh's
// 127) is a message, not a failure.
nlohmann::json RunHarness(const std::string& command, const std::string& url,
                          const std::string& model) {
  const std::string line =
      "FLEET_BENCH_URL='" + url + "' FLEET_BENCH_MODEL='" + model + "' " + command + " 2>/dev/null";
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

std::string ChosenNode(const Manifest& m, const std::string& address, std::string* deployment) {
  std::string a = address;
  if (a.rfind("deployment.", 0) == 0) a = a.substr(std::string("deployment.").size());
  const size_t at = a.find('@');
  *deployment = a.substr(0, at);
  if (at != std::string::npos) return a.substr(at + 1);
  const DeploymentSpec& d = m.deployments.at(*deployment);
  return d.nodes.empty() ? "" : d.nodes.front();  // the head, or the first replica
}

// The profile and the quality items a run uses; false after saying why.
bool Prepare(const GlobalOptions& g, const BenchOptions& o, BenchSettings* settings,
             BenchProfile* profile, std::vector<SmokeCheck>* quality_items) {
  Diagnostics diags;
  if (!LoadBenchSettings(g.dir, settings, &diags)) {
    for (const Diagnostic& d : diags) std::cerr << d.ToString() << "\n";
    return false;
  }
  auto found = settings->profiles.find(o.profile);
  if (found == settings->profiles.end()) {
    std::vector<std::string> names;
    for (const auto& [name, _] : settings->profiles) names.push_back(name);
    const std::string near = NearestName(o.profile, names);
    std::string all;
    for (const std::string& n : names) all += (all.empty() ? "" : ", ") + n;
    std::cerr << "fleet: no bench profile '" << o.profile << "'"
              << (near.empty() ? "" : "; did you mean '" + near + "'?") << " (profiles: " << all
              << ")\n";
    return false;
  }
  *profile = found->second;
  if (!o.quality) return true;
  *quality_items = BuiltinQualitySet();
  if (settings->quality_file.empty()) return true;
  std::ifstream in(std::filesystem::path(g.dir) / settings->quality_file);
  if (!in) {
    std::cerr << "fleet: cannot read bench.quality " << settings->quality_file << "\n";
    return false;
  }
  std::stringstream text;
  text << in.rdbuf();
  Result<std::vector<SmokeCheck>> own = ParseQualityJsonl(settings->quality_file, text.str());
  if (!own.ok()) {
    std::cerr << "fleet: " << own.status().message() << "\n";
    return false;
  }
  for (const SmokeCheck& c : *own) quality_items->push_back(c);
  return true;
}

// The serve of `o.address`, checked to be the deployment's (the smoke
// checks' identity and model steps, through its node); false after saying
// why.
bool Reach(const Manifest& m, const BenchOptions& o, ContainerSpec* spec, SmokeTarget* target,
           std::string* model) {
  std::string name;
  const std::string node = ChosenNode(m, o.address, &name);
  Result<ContainerSpec> rendered = RenderContainerSpec(m, name, node);
  if (!rendered.ok() || rendered->HealthUrl().empty()) {
    std::cerr << "fleet: deployment." << name << "@" << node << " serves no API here"
              << (rendered.ok() ? " (a worker of its group: bench its head)"
                                : ": " + rendered.status().message())
              << "\n";
    return false;
  }
  *spec = *rendered;
  *target = TargetFor(m, *spec);
  NodeConnections connections(&m);
  Transport* t = connections.Get(node);
  if (Status s = t->Connect(); !s.ok()) {
    std::cerr << "fleet: node " << node << " cannot be reached over SSH: " << s.message() << "\n";
    return false;
  }
  for (const SmokeResult& r : RunSmoke(*target, {}, t, nullptr)) {
    if (!r.passed()) {
      std::cerr << "fleet: " << r.check << " of deployment." << name << "@" << node << ": "
                << r.result << ": " << r.detail << "\n";
      return false;
    }
  }
  *model = target->served_model;
  if (model->empty()) {
    Result<std::vector<std::string>> models = ListServedModels(target->BaseUrl(), 30);
    if (models.ok() && !models->empty()) *model = models->front();
  }
  return true;
}

void PrintCell(const BenchCell& c, int i, int total) {
  char line[200];
  std::snprintf(line, sizeof line,
                "  cell %d/%d %-18s ttft %.3f s, pp %.0f t/s, tg %.1f t/s, %d/%d ok\n", i, total,
                c.Key().c_str(), c.ttft_s.median, c.prefill_tps.median, c.decode_tps.median,
                c.requests - c.failed, c.requests);
  std::cerr << line << std::flush;
}

// Measures: the cells, the quality set, the harness, with a progress line
// each on stderr.
void MeasureRun(const BenchSettings& settings, const BenchProfile& profile,
                const std::vector<SmokeCheck>& quality_items, const SmokeTarget& target,
                BenchRecord* rec) {
  std::cerr << "bench " << rec->id << ": deployment." << rec->deployment << "@" << rec->node << " ("
            << target.BaseUrl() << "), profile " << rec->profile << "\n";
  rec->cells = RunBenchProfile(target.BaseUrl(), rec->model, profile, PrintCell);
  if (!quality_items.empty()) {
    std::cerr << "  quality set: " << quality_items.size() << " items\n";
    const QualityScore q = RunQualitySet(target.BaseUrl(), rec->model, quality_items);
    rec->quality = QualityCount{q.passed, q.total};
    rec->quality_failures = q.failures;
  }
  if (!settings.harness.empty()) {
    std::cerr << "  external harness: " << settings.harness << "\n";
    rec->harness = RunHarness(settings.harness, target.BaseUrl(), rec->model);
    if (rec->harness.contains("error"))
      std::cerr << "fleet: " << rec->harness["error"].get<std::string>() << "\n";
  }
}

// Keeps the run (state event, report files), compares it with the last
// good one, marks it good when asked. Returns the comparison's text;
// `regressed` and `ok` (everything kept) are set.
std::string RecordRun(const GlobalOptions& g, const Manifest& m, const BenchOptions& o,
                      const BenchRecord& rec, bool* regressed, bool* ok) {
  // The history as it was before this run: the good run to compare with.
  std::unique_ptr<StateStore> store = OpenStateStore(m.state);
  Result<BenchHistory> history = ReadHistory(store.get());
  *ok = true;
  *regressed = false;
  std::string comparison, outcome = "recorded";
  if (history.ok()) {
    auto good = history->good.find(rec.deployment);
    const std::optional<BenchRecord> base =
        good == history->good.end() ? std::nullopt : FindRun(g.dir, good->second, *history);
    if (base) {
      const BenchComparison c =
          CompareBench(base->cells, rec.cells, o.tolerance_pct, base->quality, rec.quality);
      comparison = c.Render(base->id, rec.id, o.tolerance_pct);
      *regressed = c.Regressed();
      outcome = *regressed ? "regressed" : "ok";
    } else {
      comparison = "No run of deployment." + rec.deployment +
                   " is marked good yet: nothing to compare with (fleet bench --mark-good).\n";
    }
  }
  // Kept whether or not it regressed: a regressed run is history too. The
  // address, outcome and detail are what `fleet events` shows of it.
  const std::string address = "deployment." + rec.deployment + "@" + rec.node;
  std::string detail = rec.id + " " + rec.profile + ": " + BenchSummaryLine(rec.cells);
  if (rec.quality)
    detail += ", quality " + std::to_string(rec.quality->passed) + "/" +
              std::to_string(rec.quality->total);
  if (Status s = store->AppendEvent({{"time", rec.time},
                                     {"event", "bench"},
                                     {"address", address},
                                     {"outcome", outcome},
                                     {"detail", detail},
                                     {"deployment", rec.deployment},
                                     {"node", rec.node},
                                     {"record", rec.ToJson()}});
      !s.ok()) {
    std::cerr << "fleet: the bench record was not kept in the state: " << s.message() << "\n";
    *ok = false;
  }
  if (Status s = WriteBenchReport(g.dir, rec); !s.ok()) {
    std::cerr << "fleet: " << s.message() << "\n";
    *ok = false;
  }
  if (o.mark_good) {
    if (Status s = store->AppendEvent({{"time", NowRfc3339()},
                                       {"event", "bench_good"},
                                       {"address", address},
                                       {"outcome", "marked good"},
                                       {"detail", rec.id},
                                       {"deployment", rec.deployment},
                                       {"run", rec.id}});
        !s.ok()) {
      std::cerr << "fleet: --mark-good: " << s.message() << "\n";
      *ok = false;
    }
  }
  return comparison;
}

void PrintRun(const BenchOptions& o, const BenchRecord& rec, const std::string& comparison,
              bool regressed) {
  if (o.json) {
    nlohmann::json j = rec.ToJson();
    j["regressed"] = regressed;
    j["marked_good"] = o.mark_good;
    std::cout << j.dump(2) << "\n";
    return;
  }
  std::cout << "Bench " << rec.id << " (deployment." << rec.deployment << "@" << rec.node
            << ", profile " << rec.profile << ")\n\n"
            << RenderBenchTable(rec.model, rec.cells) << "\n"
            << BenchSummaryLine(rec.cells) << "\n";
  if (rec.quality)
    std::cout << "Quality: " << rec.quality->passed << "/" << rec.quality->total << "\n";
  for (const std::string& f : rec.quality_failures) std::cout << "  FAIL " << f << "\n";
  if (!rec.harness.is_null() && !rec.harness.contains("error"))
    std::cout << "Harness: " << rec.harness.dump() << "\n";
  std::cout << "\n" << comparison;
  std::cout << "Report: reports/" << rec.deployment << "/" << rec.id << ".md"
            << (o.mark_good ? "; marked good" : "") << "\n";
}

}  // namespace

int CmdBench(const GlobalOptions& g, const BenchOptions& o) {
  Manifest m;
  if (!LoadManifestSaying(g, &m, "benchmarked")) return 1;
  if (!o.compare.empty()) return Compare(g, m, o);
  if (o.address.empty()) {
    std::cerr << "fleet: bench needs deployment.NAME[@NODE] (or --compare A B)\n";
    return 1;
  }
  if (Status s = ValidateCheckAddresses(m, {o.address}); !s.ok()) {
    std::cerr << "fleet: " << s.message() << "\n";
    return 1;
  }
  BenchSettings settings;
  BenchProfile profile;
  std::vector<SmokeCheck> quality_items;
  if (!Prepare(g, o, &settings, &profile, &quality_items)) return 1;
  ContainerSpec spec;
  SmokeTarget target;
  std::string model;
  if (!Reach(m, o, &spec, &target, &model)) return 1;

  BenchRecord rec;
  rec.time = NowRfc3339();
  rec.deployment = spec.deployment;
  rec.node = spec.node;
  rec.profile = o.profile;
  rec.model = model;
  rec.spec = {spec.image_ref,
              spec.model_repo,
              spec.model_revision,
              spec.hash,
              m.deployments.at(spec.deployment).nodes,
              spec.command,
              o.version};
  rec.id = BenchRunId(rec.time, spec.hash);
  MeasureRun(settings, profile, quality_items, target, &rec);
  bool regressed = false, kept = true;
  const std::string comparison = RecordRun(g, m, o, rec, &regressed, &kept);
  PrintRun(o, rec, comparison, regressed);
  int failed = 0;
  for (const BenchCell& c : rec.cells) failed += c.failed;
  if (failed > 0) std::cerr << "fleet: " << failed << " bench request(s) failed\n";
  return regressed || failed > 0 || !kept ? 1 : 0;
}

}  // namespace fleet
