// The gate's decision (issue #47), a pure function: the deployment's last
// good bench run, the new spec's run and the deployment's `promote:` policy
// in; promote or refuse, with every reason, out. No node, no clock: what
// src/engine/gate_step.cc does around it (start the candidate, bench it,
// move the route or not) is decided here.
//
// Refused when: there is no good run to compare with; a request of the new
// run failed; no cell of the new run matches one of the good run (another
// profile); a cell's median is worse than the tolerance allows (decode or
// prefill t/s lower, TTFT or turn time higher, as CompareBench flags it); or
// the quality set scored below what `min_quality` asks (`last`: a lower
// share than the good run; a percentage: a lower share than that).
#ifndef FLEET_SRC_ENGINE_GATE_DECISION_H_
#define FLEET_SRC_ENGINE_GATE_DECISION_H_

#include <optional>
#include <string>
#include <vector>

#include "src/engine/bench_compare.h"
#include "src/engine/bench_record.h"
#include "src/plan.h"

namespace fleet {

struct GateVerdict {
  bool promote = false;
  // Why it was refused, one line each ("d0/c1/fresh tg t/s 20.0 -> 13.9
  // (-30.5%), beyond 10%"); empty when promoted.
  std::vector<std::string> reasons;
  BenchComparison comparison;  // cell by cell, as `fleet bench` prints it
  std::string base_id, candidate_id;
  // The comparison table, then "PROMOTE: ..." or "REFUSED: ..." and the
  // reasons.
  std::string Render(double tolerance_pct) const;
};

GateVerdict DecideGate(const std::optional<BenchRecord>& last_good, const BenchRecord& candidate,
                       const GateSpec& policy);

}  // namespace fleet

#endif  // FLEET_SRC_ENGINE_GATE_DECISION_H_
