// What a request for a sleeping model wakes, and what its client is told
// meanwhile, decided without a node (issue #46; wake_listener.h acts on
// it). A model wakes through the first of its routed deployments (in name
// order) whose head's node has power: {state: on_demand}; the wake powers
// on every node of that deployment and applies that deployment's part of
// the plan. A node's own schedule wakes a node that holds no serve by
// itself: power on, read back, SSH, its display RAM as declared.
#ifndef FLEET_SRC_ENGINE_WAKE_POLICY_H_
#define FLEET_SRC_ENGINE_WAKE_POLICY_H_

#include <optional>
#include <string>
#include <vector>

#include "manifests/manifest.h"

namespace fleet {

struct WakeTarget {
  std::string model;               // the served name clients ask for; "" for a node's own
  std::string deployment;          // manifest name; "" for a node's own wake
  std::vector<std::string> nodes;  // every node of the deployment, in rank order; or the node
  std::string head_host;           // where the head serves, as a gateway reaches it
  int head_port = 0;
  int hold_s = 600;    // the longest wake.hold of the gateways with wake
  int backoff_s = 30;  // the deployment's restart.backoff and max_backoff
  int max_backoff_s = 600;
};

// The deployment a request for `model` wakes; nullopt when no routed
// deployment of that model runs on an on_demand node.
std::optional<WakeTarget> WakeTargetFor(const Manifest& m, const std::string& model);

// The wake of `deployment` itself (a schedule's window brings it up
// ahead of demand); its model is the routed one, else its served name.
std::optional<WakeTarget> WakeTargetForDeployment(const Manifest& m, const std::string& deployment);

// The wake of `node` alone (its own schedule's window starts while it
// holds no serve): nullopt unless it has power {state: on_demand}. A node
// has no restart policy: its backoff is the built-in one (30 s doubled up
// to 10 min).
std::optional<WakeTarget> WakeTargetForNode(const Manifest& m, const std::string& node);

// What a wake is of, for its events and its backoff: "deployment.D@HEAD",
// or "node.N" for a node's own.
std::string WakeAddress(const WakeTarget& t);

// `m` with every node of `deployment` declared on: the plan made from it
// powers them on and brings the deployment up.
Manifest ManifestWithNodesOn(const Manifest& m, const std::vector<std::string>& nodes);

// The wait before trying a node's wake again after `failures` failed wakes
// in a row (1: the first): backoff_s doubled per failure, up to max_backoff_s.
int WakeBackoffSeconds(int failures, int backoff_s, int max_backoff_s);

// "~4 min", "~40 s": a figure a client can read.
std::string RoughDuration(int seconds);

// The OpenAI-shaped body of a 503 naming why the model is not there yet:
// {"error": {"message": MESSAGE, "type": "server_error", "param": null,
// "code": CODE}} (code "model_waking" or "model_wake_failed", ...).
std::string WakeErrorBody(const std::string& message, const std::string& code);

// The model name of an OpenAI request body (its "model"); "" when none.
std::string RequestModel(const std::string& body);

}  // namespace fleet

#endif  // FLEET_SRC_ENGINE_WAKE_POLICY_H_
