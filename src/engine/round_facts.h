// What a `fleet watch` round saw of each node and serve, as the JSON its
// line carries ("nodes", "serves"): the source of the round's Prometheus
// metrics (watch_metrics.h), so a scrape and the log say the same thing.
#ifndef FLEET_SRC_ENGINE_ROUND_FACTS_H_
#define FLEET_SRC_ENGINE_ROUND_FACTS_H_

#include <nlohmann/json.hpp>

#include "src/engine/planner.h"
#include "state/state.h"

namespace fleet {

// {"dgx1": {"up": true, "power_on": true, "display_ram_unlocked": false,
//  "gpus": [{"index": 0, "memory_free_bytes": N, "memory_total_bytes": N}]}}
// for every node the round probed. up: the probe reached it over SSH.
// power_on: the node answers, or else the power the state records for it
// (what fleet last set or found; declared on when it records none):
// an unreachable node that should be on reads up 0, power_on 1.
// display_ram_unlocked: null when the round did not read it. A GPU's
// figure the probe could not read is left out.
nlohmann::json NodesOfRound(const ProbeResult& probed, const State& state);

// [{"deployment": "qwen38", "node": "dgx5", "up": true, "quarantined":
// false}] for every deployment resource the round probed. up: its
// container runs and its health URL answered 2xx (a rank whose health is
// not asked: runs). quarantined: the state's heal ledger says so.
nlohmann::json ServesOfRound(const ProbeResult& probed, const State& state);

}  // namespace fleet

#endif  // FLEET_SRC_ENGINE_ROUND_FACTS_H_
