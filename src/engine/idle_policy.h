// Idle off (issue #46): when a node whose power follows demand (state:
// on_demand, idle_off: 30m) has had no request for its models for that
// long, `fleet watch` takes it down as destroy would (idle_round.h acts).
// Demand is read from HAProxy's own per-backend counters
// (haproxy_backend_http_requests_total of each model's backend, on each
// gateway's /metrics), less the requests fleet's own checks sent through
// the gateway that round: fleet's own traffic neither keeps a node awake
// nor wakes it.
#ifndef FLEET_SRC_ENGINE_IDLE_POLICY_H_
#define FLEET_SRC_ENGINE_IDLE_POLICY_H_

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "manifests/manifest.h"

namespace fleet {

// proxy name -> haproxy_backend_http_requests_total, from HAProxy's
// Prometheus text. Lines it cannot read are skipped.
std::map<std::string, uint64_t> BackendRequestTotals(const std::string& prometheus_text);

// The served models of the routed deployments that run on `node` (heads
// and workers alike: a worker's node sleeps with its head).
std::set<std::string> ModelsOnNode(const Manifest& m, const std::string& node);

// Keeps, between watch rounds, each model's last request total and when
// each node last saw demand.
class IdleClock {
 public:
  // One round at `now_s` (unix seconds): `totals` per model (summed over
  // the gateways; a model absent was not read), `own` requests fleet sent
  // per model since the last round, `awake` the on_demand nodes found on.
  // A node seen awake for the first time, or one whose model's total went
  // down (a gateway restarted) or could not be read, counts as busy now.
  void Observe(const Manifest& m, const std::map<std::string, uint64_t>& totals,
               const std::map<std::string, int>& own, const std::set<std::string>& awake,
               int64_t now_s);
  // Seconds since `node` last saw demand; 0 when never observed.
  int64_t IdleFor(const std::string& node, int64_t now_s) const;
  // Node -> unix seconds of its last demand, for the nodes observed awake.
  const std::map<std::string, int64_t>& LastDemands() const { return last_demand_; }
  // A node just woken or taken down starts over.
  void Forget(const std::string& node);

 private:
  std::map<std::string, uint64_t> last_total_;  // model -> total
  std::map<std::string, int64_t> last_demand_;  // node -> unix s
};

// The on_demand nodes with idle_off whose idleness reached it, each with
// why: "no request for qwen3.8 through a gateway for 31m (idle_off 30m)".
struct IdleCandidate {
  std::string node;
  std::string why;
};
std::vector<IdleCandidate> IdleCandidates(const Manifest& m, const IdleClock& clock,
                                          const std::set<std::string>& awake, int64_t now_s);

// What a node-side check found that keeps an idle node on ("" none): a
// person's interactive SSH session (an `sshd: USER@pts/N` process) or a
// GPU process fleet did not start (a compute app outside fleet's
// containers). `sessions_out` is the output of IdleBlockersScript.
std::string IdleBlocker(const std::string& script_out);

// The read-only script that IdleBlocker reads: one line per interactive
// session ("session USER@pts/N") and per GPU process not in a container
// ("gpu PID NAME").
std::string IdleBlockersScript();

}  // namespace fleet

#endif  // FLEET_SRC_ENGINE_IDLE_POLICY_H_
