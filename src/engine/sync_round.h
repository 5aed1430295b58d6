// `fleet watch --sync [REMOTE/BRANCH]`: pull-based GitOps from inside the
// lab (Argo CD's and Flux's agent, for a lab a hosted CI runner cannot
// reach). Each round fetches the manifests repo with the operator's own git
// and credentials; a new commit is validated, planned and applied under the
// state lock from a copy of that commit, so the checkout moves to it only
// once it applied: a broken commit leaves the lab on the last good one.
// Sync never goes backwards (a commit that does not descend from the
// applied one is refused). What a commit may do by itself is decided by the
// applied commit's manifests, never by the commit's own
// (src/engine/sync_policy.h): a plan that destroys or powers a node off
// waits for a person unless the applied `sync:` says `destroy: true`, and so
// does a commit that changes `sync:`, where a secret goes or whom fleet
// trusts. The commit is read as committed (its blobs, no export-subst, no
// filters); with --sync-allowed-signers or --sync-gpg-key it must carry a
// good signature from an allowed key.
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

// The watch's sync settings: set by the person who starts the watch, never
// by a commit.
struct SyncOptions {
  std::string ref;  // "REMOTE/BRANCH"; "" follows the checkout's upstream (@{u})
  int64_t lock_timeout_ms = 0;
  // The {from_env = "VAR"} names a synced commit's recipes may read
  // (--sync-allow-env); a commit naming another is refused. Empty: none.
  std::vector<std::string> allow_env;
  // An allowed-signers file (ssh-keygen(1) ALLOWED SIGNERS, git's
  // gpg.ssh.allowedSignersFile): every applied commit must carry a good SSH
  // signature from a key in it (--sync-allowed-signers).
  std::string allowed_signers;
  // GnuPG key fingerprints (--sync-gpg-key): a good OpenPGP signature from
  // one of them (the key in the watch user's keyring) also passes.
  std::vector<std::string> gpg_keys;
  bool RequiresSignature() const { return !allowed_signers.empty() || !gpg_keys.empty(); }
};

class Syncer {
 public:
  explicit Syncer(std::string dir, SyncOptions options);

  // One round. Returns its events, each {"event": "sync", "time", "commit",
  // "ref", "outcome": "applied"|"failed"|"refused"|"waiting"|"error",
  // "detail"}, also kept in the state's history. A commit that failed,
  // was refused or waits is not tried again; the next commit is.
  std::vector<nlohmann::json> Round(const std::function<void(const std::string&)>& progress);

 private:
  // Fills *ref (the upstream when empty) and *commit (what it points at
  // after a fetch); "" or why not.
  std::string Fetch(Git* git, std::string* ref, std::string* commit) const;

  std::string dir_;
  SyncOptions options_;
  std::string last_tried_;            // the last commit that did not apply
  bool last_tried_approved_ = false;  // ...and whether it was approved then
  std::string last_error_;            // the last fetch error reported (said once)
};

}  // namespace fleet

#endif  // FLEET_SRC_ENGINE_SYNC_ROUND_H_
