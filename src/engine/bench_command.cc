#include "src/engine/bench_command.h"

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>

#include "manifests/bench_schema.h"
#include "providers/shared/serving/smoke_check.h"
#include "src/engine/bench_compare.h"
#include "src/engine/bench_history.h"
#include "src/engine/bench_quality.h"
#include "src/engine/bench_record.h"
#include "src/engine/bench_run.h"
#include "src/engine/node_connections.h"
#include "src/engine/serve_checks.h"

namespace fleet {
namespace {

std::optional<QualityCount> Quality(const BenchRecord& r) { return r.quality; }

int Compare(const GlobalOptions& g, const Manifest& m, const BenchOptions& o) {
  std::unique_ptr<StateStore> store = OpenStateStore(m.state);
  Result<BenchHistory> h = ReadBenchHistory(store.get());
  if (!h.ok()) {
    std::cerr << "fleet: bench history: " << h.status().message() << "\n";
    return 1;
  }
  const std::optional<BenchRecord> a = FindBenchRun(g.dir, o.compare[0], *h);
  const std::optional<BenchRecord> b = FindBenchRun(g.dir, o.compare[1], *h);
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

std::string ChosenNode(const Manifest& m, const std::string& address, std::string* deployment) {
  std::string a = address;
  if (a.rfind("deployment.", 0) == 0) a = a.substr(std::string("deployment.").size());
  const size_t at = a.find('@');
  *deployment = a.substr(0, at);
  if (at != std::string::npos) return a.substr(at + 1);
  const DeploymentSpec& d = m.deployments.at(*deployment);
  return d.nodes.empty() ? "" : d.nodes.front();  // the head, or the first replica
}

// The serve of `o.address`, checked to be the deployment's (the smoke
// checks' identity and model steps, through its node); false after saying
// why.
bool Reach(const GlobalOptions& g, const Manifest& m, const BenchOptions& o, ContainerSpec* spec,
           SmokeTarget* target, std::string* model) {
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
  for (const SmokeResult& r : RunSmoke(*target, {}, t, nullptr, g.clock)) {
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

// Keeps the run (state event, report files), compares it with the last
// good one, marks it good when asked. Returns the comparison's text;
// `regressed` and `ok` (everything kept) are set.
std::string RecordRun(const GlobalOptions& g, const Manifest& m, const BenchOptions& o,
                      const BenchRecord& rec, bool* regressed, bool* ok) {
  // The history as it was before this run: the good run to compare with.
  std::unique_ptr<StateStore> store = OpenStateStore(m.state);
  Result<BenchHistory> history = ReadBenchHistory(store.get());
  *ok = true;
  *regressed = false;
  std::string comparison, outcome = "recorded";
  if (history.ok()) {
    const std::optional<BenchRecord> base = LastGoodRun(g.dir, rec.deployment, *history);
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
  // Kept whether or not it regressed: a regressed run is history too.
  if (Status s = KeepBenchRun(store.get(), g.dir, rec, outcome); !s.ok()) {
    std::cerr << "fleet: " << s.message() << "\n";
    *ok = false;
  }
  if (o.mark_good) {
    if (Status s = MarkBenchGood(store.get(), rec, ""); !s.ok()) {
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
  Result<BenchPlan> plan = PrepareBench(g.dir, o.profile, o.quality);
  if (!plan.ok()) {
    std::cerr << "fleet: " << plan.status().message() << "\n";
    return 1;
  }
  ContainerSpec spec;
  SmokeTarget target;
  std::string model;
  if (!Reach(g, m, o, &spec, &target, &model)) return 1;

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
  // The progress display: a line per cell on a terminal, quiet without one
  // (a CI log gets the table at the end).
  const bool tty = isatty(STDERR_FILENO) != 0;
  MeasureBench(*plan, target.BaseUrl(), &rec, [tty](const std::string& line) {
    if (tty) std::cerr << line << "\n" << std::flush;
  });
  if (rec.harness.is_object() && rec.harness.contains("error"))
    std::cerr << "fleet: " << rec.harness["error"].get<std::string>() << "\n";
  bool regressed = false, kept = true;
  const std::string comparison = RecordRun(g, m, o, rec, &regressed, &kept);
  PrintRun(o, rec, comparison, regressed);
  int failed = 0;
  for (const BenchCell& c : rec.cells) failed += c.failed;
  if (failed > 0) std::cerr << "fleet: " << failed << " bench request(s) failed\n";
  return regressed || failed > 0 || !kept ? 1 : 0;
}

}  // namespace fleet
