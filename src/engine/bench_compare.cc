#include "src/engine/bench_compare.h"

#include <cstdio>
#include <map>
#include <sstream>

namespace fleet {
namespace {

std::string Num(double v) {
  if (v < 0) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, v < 10 ? "%.3f" : v < 1000 ? "%.1f" : "%.0f", v);
  return buf;
}

std::string Count(const QualityCount& q) {
  return std::to_string(q.passed) + "/" + std::to_string(q.total);
}

}  // namespace

bool BenchComparison::Regressed() const {
  if (quality_worse) return true;
  for (const BenchDelta& d : deltas)
    if (d.worse) return true;
  return false;
}

BenchComparison CompareBench(const std::vector<BenchCell>& base,
                             const std::vector<BenchCell>& current, double tolerance_pct,
                             std::optional<QualityCount> base_quality,
                             std::optional<QualityCount> current_quality) {
  BenchComparison out;
  std::map<std::string, const BenchCell*> by_key;
  for (const BenchCell& c : base) by_key[c.Key()] = &c;
  std::map<std::string, bool> matched;
  for (const BenchCell& now : current) {
    auto it = by_key.find(now.Key());
    if (it == by_key.end()) {
      out.unmatched.push_back(now.Key() + " (new)");
      continue;
    }
    matched[now.Key()] = true;
    const BenchCell& was = *it->second;
    struct Figure {
      const char* name;
      double base, current;
      bool higher_is_better;
    };
    // The prefill rate of a cached cell is the cache's (a TTFT of a few
    // ms): its noise is no regression, its TTFT says what matters.
    std::vector<Figure> figures = {{"tg t/s", was.decode_tps.median, now.decode_tps.median, true},
                                   {"ttft s", was.ttft_s.median, now.ttft_s.median, false},
                                   {"turn s", was.turn_s.median, now.turn_s.median, false}};
    if (now.fresh)
      figures.insert(figures.begin(),
                     {"pp t/s", was.prefill_tps.median, now.prefill_tps.median, true});
    for (const Figure& f : figures) {
      if (f.base <= 0 || f.current < 0) continue;
      BenchDelta d{now.Key(), f.name, f.base, f.current, (f.current - f.base) / f.base * 100};
      d.worse = f.higher_is_better
                    ? d.change_pct < -tolerance_pct
                    : d.change_pct > tolerance_pct && f.current - f.base > kBenchTimeNoiseS;
      out.deltas.push_back(d);
    }
    if (now.failed > was.failed) {
      BenchDelta d{
          now.Key(), "failed", static_cast<double>(was.failed), static_cast<double>(now.failed),
          0,         true};
      out.deltas.push_back(d);
    }
  }
  for (const BenchCell& c : base)
    if (!matched.count(c.Key())) out.unmatched.push_back(c.Key() + " (gone)");
  if (base_quality) out.quality_base = Count(*base_quality);
  if (current_quality) out.quality_current = Count(*current_quality);
  if (base_quality && current_quality && base_quality->total > 0 && current_quality->total > 0) {
    // Compared as shares: an operator's file may have grown between runs.
    out.quality_worse = static_cast<double>(current_quality->passed) / current_quality->total <
                        static_cast<double>(base_quality->passed) / base_quality->total;
  }
  return out;
}

std::string BenchComparison::Render(const std::string& base_id, const std::string& current_id,
                                    double tolerance_pct) const {
  std::ostringstream out;
  char head[160];
  std::snprintf(head, sizeof head, "  %-22s %-8s %10s %10s %9s\n", "CELL", "FIGURE", "BASE", "NOW",
                "CHANGE");
  out << "Compared with " << base_id << " (tolerance " << Num(tolerance_pct) << "%):\n" << head;
  for (const BenchDelta& d : deltas) {
    char line[200];
    char change[32];
    std::snprintf(change, sizeof change, "%+.1f%%", d.change_pct);
    std::snprintf(line, sizeof line, "%s %-22s %-8s %10s %10s %9s\n", d.worse ? "!" : " ",
                  d.cell.c_str(), d.figure.c_str(), Num(d.base).c_str(), Num(d.current).c_str(),
                  d.figure == "failed" ? "" : change);
    out << line;
  }
  for (const std::string& u : unmatched) out << "  " << u << ": in one run only\n";
  if (!quality_base.empty() || !quality_current.empty())
    out << (quality_worse ? "! " : "  ") << "quality "
        << (quality_base.empty() ? "-" : quality_base) << " -> "
        << (quality_current.empty() ? "-" : quality_current) << "\n";
  out << (Regressed() ? "REGRESSED: " : "OK: ") << current_id
      << (Regressed() ? " is worse than " : " is within tolerance of ") << base_id << "\n";
  return out.str();
}

}  // namespace fleet
