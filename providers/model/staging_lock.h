// The staging lock: one writer per model per cache, across fleet processes
// and operators (the log's duplicate download started beside a running one).
//
// <cache>/.fleet-staging-models--org--name.lock/ is created atomically by a
// keeper shell on the node, born with its owner line "pid host boot_id start
// controller pid_ns" (a folder renamed into place; controller:
// ThisControllerId() of the fleet process), and the keeper lives as long as
// the staging: the controller holds its
// channel open. When the controller dies the channel closes, the keeper's
// next heartbeat (one a second) fails and its trap removes the lock. Until
// then the controller's host can already tell it is gone: a re-apply from
// there (right after a kill -9 of fleet) ends that keeper and takes the lock
// at once. When the node dies the lock stays, and a later apply finds its pid
// gone (or the boot id changed) and takes it over, saying so. A lock held
// from another host (a shared store) whose controller lives elsewhere cannot
// be checked from here and is never taken over.
#ifndef FLEET_PROVIDERS_MODEL_STAGING_LOCK_H_
#define FLEET_PROVIDERS_MODEL_STAGING_LOCK_H_

#include <memory>
#include <string>
#include <thread>

#include "providers/shared/hub_cache.h"
#include "src/status.h"
#include "src/transport.h"

namespace fleet {

// "<cache>/.fleet-staging-models--org--name.lock" (a node path).
std::string StagingLockPath(const std::string& cache, const std::string& repo);

// "staging in progress by pid 123 on dgx1 since 2026-09-26 00:00:00 UTC".
std::string DescribeLockOwner(const StagingLock& lock);

class StagingLockHolder {
 public:
  // Takes the lock through `keeper`, a transport used for nothing else
  // (its one command lasts until Release). On success `*took_over` holds the
  // stale owner line replaced and why it was stale, if any. A lock whose
  // keeper still runs for a fleet process of this host that is gone (killed
  // a moment ago) is taken over at once. When another live process holds
  // it: an error "staging in progress by pid N on H since T (lock PATH)".
  static Result<std::unique_ptr<StagingLockHolder>> Acquire(std::unique_ptr<Transport> keeper,
                                                            const std::string& cache,
                                                            const std::string& repo,
                                                            std::string* took_over);
  ~StagingLockHolder();

  // Ends the keeper (through `control`, another transport to the same
  // node) and waits for it; the keeper's trap removes the lock.
  Status Release(Transport* control);

  const StagingLock& owner() const { return owner_; }

 private:
  StagingLockHolder() = default;
  // Runs `script` on keeper_ in thread_ and returns its first line ("" when
  // it ended without one: shared_->error says why).
  std::string Start(const std::string& script);
  struct Shared;
  std::shared_ptr<Shared> shared_;
  std::unique_ptr<Transport> keeper_;
  std::thread thread_;
  StagingLock owner_;
  bool released_ = false;
};

}  // namespace fleet

#endif  // FLEET_PROVIDERS_MODEL_STAGING_LOCK_H_
