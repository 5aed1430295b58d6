// One on_demand node taken down as `fleet destroy --target node.N` would,
// for that node alone: its serves stop, display RAM is restored, the OS
// shuts down and the switch goes off, read back; its models and images
// stay, and the gateways keep routing (the wake backup takes the next
// request). Idle off and a schedule's window end both take nodes down
// this way, under the same rules: never while a person is logged in on
// it, a GPU process fleet did not start runs there, or an apply, heal or
// wake holds the state lock (one try; the caller asks again next round).
#ifndef FLEET_SRC_ENGINE_NODE_TAKE_DOWN_H_
#define FLEET_SRC_ENGINE_NODE_TAKE_DOWN_H_

#include <functional>
#include <string>

#include "manifests/manifest.h"
#include "state/state_store.h"

namespace fleet {

enum class TakeDownOutcome {
  kPoweredOff,
  kKept,    // a blocker: why says which
  kFailed,  // the plan or a step failed
};

struct TakeDownResult {
  TakeDownOutcome outcome = TakeDownOutcome::kKept;
  std::string why;  // kKept: what keeps it on; kFailed: what failed; else the steps done
};

// `progress` gets the apply's lines (may be empty).
TakeDownResult TakeNodeDown(const Manifest& m, StateStore* store, const std::string& node,
                            const std::function<void(const std::string&)>& progress);

}  // namespace fleet

#endif  // FLEET_SRC_ENGINE_NODE_TAKE_DOWN_H_
