#include "src/engine/gate_decision.h"

#include <cstdio>

namespace fleet {
namespace {

std::string Figure(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, v < 10 ? "%.3f" : v < 1000 ? "%.1f" : "%.0f", v);
  return buf;
}

std::string Percent(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f%%", v);
  return buf;
}

double Share(const QualityCount& q) {
  return q.total > 0 ? static_cast<double>(q.passed) / q.total : 0;
}

std::string Score(const QualityCount& q) {
  return std::to_string(q.passed) + "/" + std::to_string(q.total);
}

// The quality set against the policy; "" when it passes.
std::string QualityRefusal(const std::optional<QualityCount>& base,
                           const std::optional<QualityCount>& now, const GateSpec& policy) {
  if (!now || now->total == 0) return "the quality set did not run on the new spec";
  if (policy.min_quality_last) {
    if (!base || base->total == 0) return "";  // nothing to hold it to: the cells decide
    if (Share(*now) < Share(*base))
      return "quality " + Score(*now) + " is below the last good run's " + Score(*base) +
             " (min_quality: last)";
    return "";
  }
  if (Share(*now) * 100 < policy.min_quality_pct)
    return "quality " + Score(*now) + " (" + Percent(Share(*now) * 100) +
           ") is below min_quality " + Percent(policy.min_quality_pct);
  return "";
}

}  // namespace

GateVerdict DecideGate(const std::optional<BenchRecord>& last_good, const BenchRecord& candidate,
                       const GateSpec& policy) {
  GateVerdict v;
  v.candidate_id = candidate.id;
  int failed = 0;
  for (const BenchCell& c : candidate.cells) failed += c.failed;
  if (failed > 0)
    v.reasons.push_back(std::to_string(failed) + " request(s) of the new spec failed");
  if (!last_good) {
    v.reasons.push_back("no good run of deployment." + candidate.deployment +
                        " to compare with (fleet bench --mark-good, or a passed gate, makes one)");
    return v;
  }
  v.base_id = last_good->id;
  // The cells by CompareBench; the quality by the policy (a percentage is
  // not the good run's share).
  v.comparison = CompareBench(last_good->cells, candidate.cells, policy.max_regression_pct);
  if (last_good->quality) v.comparison.quality_base = Score(*last_good->quality);
  if (candidate.quality) v.comparison.quality_current = Score(*candidate.quality);
  size_t matched = 0;
  for (const BenchCell& c : candidate.cells)
    for (const BenchCell& b : last_good->cells) matched += b.Key() == c.Key() ? 1 : 0;
  if (matched == 0)
    v.reasons.push_back("no cell of the new run matches one of " + last_good->id + " (profile " +
                        last_good->profile + " against " + candidate.profile + ")");
  for (const BenchDelta& d : v.comparison.deltas) {
    if (!d.worse || d.figure == "failed") continue;
    char change[32];
    std::snprintf(change, sizeof change, "%+.1f%%", d.change_pct);
    v.reasons.push_back(d.cell + " " + d.figure + " " + Figure(d.base) + " -> " +
                        Figure(d.current) + " (" + change + "), beyond " +
                        Percent(policy.max_regression_pct));
  }
  const std::string quality = QualityRefusal(last_good->quality, candidate.quality, policy);
  if (!quality.empty()) {
    v.comparison.quality_worse = true;
    v.reasons.push_back(quality);
  }
  v.promote = v.reasons.empty();
  return v;
}

std::string GateVerdict::Render(double tolerance_pct) const {
  std::string out;
  if (!base_id.empty()) {
    // The table without its own verdict line: the gate's follows.
    std::string table = comparison.Render(base_id, candidate_id, tolerance_pct);
    const size_t last = table.rfind('\n', table.size() - 2);
    out = last == std::string::npos ? table : table.substr(0, last + 1);
  }
  if (promote) {
    out += "PROMOTE: " + candidate_id + " is within " + Percent(tolerance_pct) + " of " + base_id +
           "\n";
    return out;
  }
  out += "REFUSED: " + candidate_id + (base_id.empty() ? "" : " against " + base_id) + "\n";
  for (const std::string& r : reasons) out += "  - " + r + "\n";
  return out;
}

}  // namespace fleet
