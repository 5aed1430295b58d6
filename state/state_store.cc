// Backend-independent helpers of StateStore (see state/state_store.h).
#include "state/state_store.h"

#include <chrono>
#include <thread>

namespace fleet {

Result<std::unique_ptr<StateLock>> LockWithTimeout(StateStore* store, const std::string& operation,
                                                   int64_t timeout_ms) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  auto pause = std::chrono::milliseconds(100);
  for (;;) {
    Result<std::unique_ptr<StateLock>> lock = store->Lock(operation);
    if (lock.ok() || std::chrono::steady_clock::now() >= deadline) return lock;
    // Only a held lock is worth waiting for; a broken store is not.
    if (lock.status().message().find("locked by") == std::string::npos) return lock;
    std::this_thread::sleep_for(
        std::min<std::chrono::nanoseconds>(pause, deadline - std::chrono::steady_clock::now()));
    pause = std::min(pause * 2, std::chrono::milliseconds(2000));
  }
}

}  // namespace fleet
