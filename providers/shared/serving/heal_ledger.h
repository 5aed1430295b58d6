// What `fleet watch --heal` remembers of one serve between rounds and across
// restarts of the watch: the heals it tried within the policy's window, its
// backoff, whether it quarantined the serve. Kept in the serve's state record
// (DeploymentRecord::heal), so an apply that writes the record anew (the
// serve replaced, or started again) clears it, and `fleet status` reads it.
#ifndef FLEET_PROVIDERS_SHARED_SERVING_HEAL_LEDGER_H_
#define FLEET_PROVIDERS_SHARED_SERVING_HEAL_LEDGER_H_

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace fleet {

struct HealLedger {
  // Unix seconds of each try (a heal, or a wait for memory) still inside the
  // policy's window, oldest first.
  std::vector<int64_t> tries;
  // Tries in a row that did not hold (a heal after which the serve failed
  // again the next round, a heal that failed, a wait for memory): the next
  // try waits backoff * 2^failed_in_row after the last, capped.
  int failed_in_row = 0;
  int64_t last_try_at = 0;  // unix seconds the last try ended; 0: none
  // A heal ended well and no round has looked at the serve since: the next
  // round says whether it held.
  bool unproven = false;
  // A heal that started and has not ended (a watch killed in the middle):
  // the next round finishes it.
  int64_t in_progress_since = 0;
  std::string last_reason;  // "smoke math: got '72 7#7'"
  bool quarantined = false;
  int64_t quarantined_at = 0;
  std::string quarantine;  // "3 heals in 30m; last: smoke math: got '72 7#7'"
  // The node's free GPU memory (bytes) measured right before the last good
  // start; 0: not measured.
  uint64_t free_before_start_bytes = 0;

  bool Empty() const;
};

void to_json(nlohmann::json& j, const HealLedger& v);
void from_json(const nlohmann::json& j, HealLedger& v);

}  // namespace fleet

#endif  // FLEET_PROVIDERS_SHARED_SERVING_HEAL_LEDGER_H_
