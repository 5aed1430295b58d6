#include "src/engine/bench_report.h"

#include <algorithm>
#include <cstdio>
#include <iostream>

#include "src/engine/bench_history.h"

namespace fleet {
namespace {

// The run's decode rate: the median of its cells' medians (-1: none).
double DecodeRate(const BenchRecord& r) {
  std::vector<double> v;
  for (const BenchCell& c : r.cells)
    if (c.decode_tps.median >= 0) v.push_back(c.decode_tps.median);
  return Quantile(v, 0.5);
}

std::string Bar(double value, double best) {
  if (value < 0 || best <= 0) return std::string(20, ' ');
  const int n = std::clamp(static_cast<int>(value / best * 20 + 0.5), 0, 20);
  std::string out;
  for (int i = 0; i < n; ++i) out += "\u2588";  // a full block
  return out + std::string(static_cast<size_t>(20 - n), ' ');
}

std::string Short(const std::string& s, size_t n) {
  return s.size() <= n ? s : s.substr(0, n - 3) + "...";
}

}  // namespace

std::string RenderBenchHistory(const std::vector<BenchHistoryRun>& runs,
                               const std::map<std::string, std::string>& good,
                               const std::string& deployment) {
  // deployment -> spec hash -> runs, each in the order first seen.
  std::vector<std::string> deployments;
  std::map<std::string, std::vector<std::string>> specs;
  std::map<std::string, std::map<std::string, std::vector<const BenchHistoryRun*>>> by;
  std::map<std::string, double> best;
  for (const BenchHistoryRun& r : runs) {
    const std::string& d = r.record.deployment;
    if (!deployment.empty() && d != deployment) continue;
    if (!by.count(d)) deployments.push_back(d);
    const std::string& spec = r.record.spec.spec_hash;
    if (!by[d].count(spec)) specs[d].push_back(spec);
    by[d][spec].push_back(&r);
    best[d] = std::max(best[d], DecodeRate(r.record));
  }
  if (deployments.empty())
    return deployment.empty() ? "No bench runs kept yet (fleet bench deployment.NAME).\n"
                              : "No bench runs of deployment " + deployment + " kept.\n";
  std::string out;
  for (const std::string& d : deployments) {
    auto g = good.find(d);
    out += "deployment " + d + " (good run: " + (g == good.end() ? "none" : g->second) + ")\n";
    for (const std::string& spec : specs[d]) {
      const BenchRecord& first = by[d][spec].front()->record;
      out += "  spec " + spec.substr(0, 12) + "  " + Short(first.spec.image_ref, 72) +
             (first.spec.model_revision.empty() ? ""
                                                : "  @" + first.spec.model_revision.substr(0, 12)) +
             "\n";
      for (const BenchHistoryRun* r : by[d][spec]) {
        const BenchRecord& rec = r->record;
        const bool is_good = g != good.end() && g->second == rec.id;
        char tg[32];
        std::snprintf(tg, sizeof tg, "%6.1f", DecodeRate(rec));
        std::string quality = rec.quality ? std::to_string(rec.quality->passed) + "/" +
                                                std::to_string(rec.quality->total)
                                          : "-";
        char line[512];
        std::snprintf(line, sizeof line, "  %s %-33s %-8s %-14s tg %s t/s %s q %-7s %s\n",
                      is_good ? "*" : " ", rec.id.c_str(), rec.profile.c_str(), r->outcome.c_str(),
                      tg, Bar(DecodeRate(rec), best[d]).c_str(), quality.c_str(),
                      BenchSummaryLine(rec.cells).c_str());
        out += line;
      }
    }
  }
  out +=
      "(* the good run: what the next run and the promote gate compare with; the bar is "
      "the run's decode rate against its deployment's best)\n";
  return out;
}

int CmdBenchReport(const GlobalOptions& g, const std::string& deployment) {
  Manifest m;
  if (!LoadManifestSaying(g, &m, "reported")) return 1;
  std::unique_ptr<StateStore> store = OpenStateStore(m.state);
  Result<BenchHistory> h = ReadBenchHistory(store.get());
  if (!h.ok()) {
    std::cerr << "fleet: bench history: " << h.status().message() << "\n";
    return 1;
  }
  std::vector<BenchHistoryRun> runs;
  for (size_t i = 0; i < h->runs.size(); ++i)
    runs.push_back({h->runs[i], i < h->outcomes.size() ? h->outcomes[i] : ""});
  std::cout << RenderBenchHistory(runs, h->good, deployment);
  return 0;
}

}  // namespace fleet
