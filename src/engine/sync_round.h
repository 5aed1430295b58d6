// `fleet watch --sync [REMOTE/BRANCH]`: pull-based GitOps from inside the
// lab (Argo CD's and Flux's agent, for a lab a hosted CI runner cannot
// reach). Each round fetches the manifests repo with the operator's own git
// and credentials; a new commit is validated, planned and applied under the
// state lock from a copy of that commit, so the checkout moves to it only
// once it applied: a broken commit leaves the lab on the last good one.
// Sync never goes backwards (a commit that does not descend from the
// applied one is refused), and a plan that destroys or powers a node off
// waits for a person unless `sync: {destroy: true}`.
#ifndef FLEET_SRC_ENGINE_SYNC_ROUND_H_
#define FLEET_SRC_ENGINE_SYNC_ROUND_H_

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "src/engine/commands.h"

namespace fleet {

class Git;  // sync_round.cc: git in the manifests checkout

class Syncer {
 public:
  // `ref`: "REMOTE/BRANCH"; "" follows the checkout's upstream (@{u}).
  Syncer(std::string dir, std::string ref, int64_t lock_timeout_ms);

  // One round. Returns its events, each {"event": "sync", "time", "commit",
  // "ref", "outcome": "applied"|"failed"|"refused"|"waiting"|"error",
  // "detail"}, also kept in the state's history. A commit that failed,
  // was refused or waits is not tried again; the next commit is.
  std::vector<nlohmann::json> Round(const std::function<void(const std::string&)>& progress);

 private:
  // Fills *ref (the upstream when empty) and *commit (what it points at
  // after a fetch); "" or why not.
  std::string Fetch(Git* git, std::string* ref, std::string* commit) const;

  std::string dir_, ref_;
  int64_t lock_timeout_ms_;
  std::string last_tried_;  // the last commit that did not apply
  std::string last_error_;  // the last fetch error reported (said once)
};

}  // namespace fleet

#endif  // FLEET_SRC_ENGINE_SYNC_ROUND_H_
