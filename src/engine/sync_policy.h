// What `fleet watch --sync` may apply by itself, decided from the manifests
// the lab runs now (the applied commit), never from the commit that asks:
// the trust boundary of pull-based GitOps. Anyone with push access writes
// the incoming commit, so it cannot widen its own gate (`sync:`), move where
// the watch's secrets go (the switch URL, a token's variable), or change whom
// fleet trusts (ssh settings, node addresses, new nodes, the state backend)
// without a person (`fleet apply` of that commit, or `fleet sync approve`).
//
// Pure functions of two loaded manifests and a plan: no I/O.
#ifndef FLEET_SRC_ENGINE_SYNC_POLICY_H_
#define FLEET_SRC_ENGINE_SYNC_POLICY_H_

#include <memory>
#include <string>
#include <vector>

#include "manifests/manifest.h"
#include "src/plan.h"
#include "src/provider.h"

namespace fleet {

// The changes from `applied` to `next` that only a person may make, one line
// each: "fleet.yaml:LINE:COL: <what changed> (<why a person>)", the location
// in `next`. Empty when sync may go on. Controller paths (ssh identity and
// known_hosts) compare as resolved against one root: REQUIRES: both manifests
// resolved against the same root (see RebaseControllerPaths).
std::vector<std::string> ChangesForAPerson(const Manifest& applied, const Manifest& next);

// The first change of `plan` that `policy` (the applied commit's `sync:`)
// does not let sync make, as a reason; "" when none. A change its provider
// (of `providers`) says takes something down (Provider::TakesDown) needs
// sync.destroy, as a delete does.
std::string PlanNeedsAPerson(const Plan& plan, const SyncSettings& policy,
                             const std::vector<std::unique_ptr<Provider>>& providers);

// The recipes' {from_env = "VAR"} names in `next` that `allowed` (the watch's
// --sync-allow-env, which no commit can change) does not list, each as
// "recipes/x.toml: NAME = {from_env = \"VAR\"}". Empty when all are allowed.
std::vector<std::string> EnvNamesNotAllowed(const Manifest& next,
                                            const std::vector<std::string>& allowed);

// The controller files a commit carries inside the repo and fleet trusts
// (power.ca_file, the ssh identity and known_hosts files, top level and per
// node; gateway keys files) whose bytes differ from the same file in the
// lab's checkout, one line each: "fleet.yaml:LINE:COL: the commit changes
// the content of <path> (<why a person>)". Their paths compare equal, so
// ChangesForAPerson cannot see such a change: a new CA or known_hosts entry
// at the same path would let the next rounds send the switch token to, or
// log in to, whoever the commit names.
// REQUIRES: `next` loaded from `copy_root`, before RebaseControllerPaths.
std::vector<std::string> TrustFileChanges(const Manifest& next, const std::string& copy_root,
                                          const std::string& live_root);

// Rewrites the controller paths of `m` (ssh identity and known_hosts, the
// state file) that lie under `from` to lie under `to`: a commit loaded from
// a temporary copy resolves its relative paths against the lab's checkout,
// not against the copy (removed after the round, and written by the commit).
void RebaseControllerPaths(const std::string& from, const std::string& to, Manifest* m);

}  // namespace fleet

#endif  // FLEET_SRC_ENGINE_SYNC_POLICY_H_
