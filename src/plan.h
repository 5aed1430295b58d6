// Plan: what apply will do, as a plain value (printable, saveable, testable).
//
// Built by the planner from desired resources + probed facts + state; run by
// the executor. The JSON form is the one of DESIGN.md ("fleet plan --json").
#ifndef FLEET_SRC_PLAN_H_
#define FLEET_SRC_PLAN_H_

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "src/plan_diagnostic.h"
#include "src/status.h"

namespace fleet {

enum class Action { kNoop, kCreate, kUpdate, kReplace, kDelete };
const char* ActionName(Action a);  // "noop", "create", ...
bool ParseAction(const std::string& s, Action* out);

// A copy of bytes from one node to another that a change makes (an image,
// a model), and the way they go: over the fabric between the two nodes or
// through the controller. Filled by the provider's diff; the plan shows the
// copies of one thing from one source along one route as one line
// (src/engine/copy_routes.h).
struct CopyRoute {
  std::string what;      // "image b12x", "model qwen38"
  std::string from, to;  // node names
  bool direct = false;   // over the fabric, node to node
  std::string fabric;    // direct: "10.77.0.0/24" (the target's address when no subnet is known)
  // Not direct: why, in words that name no single target, so that the copies
  // to several targets read as one ("no common fabric subnet").
  std::string why_not;
  std::string to_address;  // direct: the target's fabric IPv4 (a stream's listener binds it)
  // A fan-out: the copies of one thing from one source over one fabric go
  // as one pipelined chain, source -> chain[0] -> chain[1] -> ..., each
  // target writing what it receives and forwarding it as it arrives, so the
  // source's link carries each byte once (src/engine/copy_chains.h). Every
  // change of the fan-out carries the same chain, its own target in it.
  // Empty: a copy of its own.
  struct Hop {
    std::string node, address;
    bool operator==(const Hop&) const = default;
  };
  std::vector<Hop> chain;

  bool operator==(const CopyRoute&) const = default;
  // "image b12x dgx4 -> dgx1 -> dgx2": the same for every change of one chain.
  std::string ChainKey() const;
  nlohmann::json ToJson() const;
  static Result<CopyRoute> FromJson(const nlohmann::json& j);
};

// The gate a deployment's change passes before its new spec takes the route
// (a deployment's `promote:`, issue #47; src/engine/gate_plan.h): set on the
// change by the planner, run by apply (src/engine/gate_step.h).
struct GateSpec {
  std::string deployment;
  std::string profile = "quick";
  double max_regression_pct = 10;
  bool min_quality_last = true;
  double min_quality_pct = 0;
  // Where the new spec is benched beside the old one; "" in place, the old
  // container kept, stopped, for the rollback.
  std::string candidate;
  bool operator==(const GateSpec&) const = default;
  nlohmann::json ToJson() const;
  static Result<GateSpec> FromJson(const nlohmann::json& j);
};

struct PlanChange {
  std::string address;
  std::string type;
  std::string node;
  Action action = Action::kNoop;
  std::string summary;               // one line for humans: "unlock display RAM"
  std::vector<std::string> reasons;  // why this change is needed
  nlohmann::json before;             // null when absent
  nlohmann::json after;              // null when removed
  std::vector<std::string> depends_on;
  // Provider data the step needs at apply time (desired attributes the
  // diff does not show, recorded values to restore). Never holds secrets.
  nlohmann::json detail = nlohmann::json::object();
  // Set when the change copies between nodes ("copy" in the JSON form).
  std::optional<CopyRoute> copy;
  // Set when the change passes a gate before it takes the route ("gate" in
  // the JSON form).
  std::optional<GateSpec> gate;
  // Removals this change must come before (create before destroy: a
  // gateway sends clients to a moved serve's new place before the old one
  // stops). The planner orders them so (src/engine/create_before_destroy.h);
  // where it cannot, because the removal must come first (the new place is
  // the old one's node), `if_not` is added to this change's reasons. Plan
  // time only: not in the JSON form, where depends_on already says it.
  struct RemovalAfter {
    std::string address;
    std::string if_not;
  };
  std::vector<RemovalAfter> before_removals;
  // Set by a diff that cannot plan this resource (identity mismatch, node
  // unreachable without a power switch): the planner turns it into a plan
  // error and the plan applies nothing.
  std::string error;
};

struct Plan {
  static constexpr const char* kFormatVersion = "1";
  std::string lineage;  // of the state the plan was made against
  uint64_t serial = 0;
  bool destroy = false;
  std::vector<std::string> targets;
  std::vector<PlanChange> changes;  // in a topological order
  // Why nothing can be applied; empty when the plan may be. In the JSON form
  // twice: "errors" their lines (as shown), "diagnostics" the structs
  // (present only when there are errors).
  std::vector<PlanDiagnostic> errors;
  std::vector<std::string> warnings;
  // Nodes the probe could not reach (node -> why, naming its address):
  // shown first, one line each, since the errors and changes of what runs
  // on them follow from it.
  std::map<std::string, std::string> unreachable;
  // The manifests and recipes the plan was made from: path relative to the
  // repo -> "sha256:<hex>" of its bytes. Applying a saved plan is refused
  // when any of them changed since (src/engine/plan_sources.h).
  std::map<std::string, std::string> sources;

  bool HasChanges() const;  // any change that is not a noop
  std::map<std::string, int> Summary() const;
  const PlanChange* Find(const std::string& address) const;

  nlohmann::json ToJson() const;
  static Result<Plan> FromJson(const nlohmann::json& j);
};

}  // namespace fleet

#endif  // FLEET_SRC_PLAN_H_
