// The decisions of `fleet watch --heal` for one serve and one round, apart
// from doing them (heal_round.h), so they are tested without a node: what
// the round shows wrong, whether the deployment's restart policy lets a
// round heal it, the backoff, the limit and the quarantine.
#ifndef FLEET_SRC_ENGINE_HEAL_POLICY_H_
#define FLEET_SRC_ENGINE_HEAL_POLICY_H_

#include <cstdint>
#include <string>

#include "manifests/manifest.h"
#include "providers/shared/serving/heal_ledger.h"

namespace fleet {

// What one watch round saw of a recorded serve.
struct ServeSeen {
  bool reachable = true;  // its node answered the probe
  bool exists = false;    // its container is there
  std::string state;      // the container's state ("running", "exited", ...)
  int exit_code = 0;
  bool has_health = true;  // false: a worker of a group (no API of its own)
  int health = 0;          // the health URL's HTTP status; 0: no answer
  // Seconds in a row the health probe has timed out while the container
  // runs (a busy engine: a long prefill holds its one event loop); -1: it
  // did not time out this round.
  int64_t busy_s = -1;
  int busy_grace_s = 0;       // health.busy_grace: how long busy is not unhealthy
  std::string smoke_failure;  // "smoke math: got '72 7#7'"; "": none failed
};

enum class HealAction {
  kNone,         // healthy, not allowed, or nothing this round can do
  kHeal,         // bring it back now
  kBackoff,      // failing, but the backoff since the last try has not passed
  kQuarantine,   // failing after `limit` tries in the window: stop trying
  kQuarantined,  // quarantined earlier: no try until an apply or a reset
};

struct HealDecision {
  HealAction action = HealAction::kNone;
  std::string reason;       // "exit", "unhealthy" or "smoke"; "" when healthy
  std::string detail;       // "container exited (exit code 137)", the smoke failure, ...
  int64_t next_try_at = 0;  // kBackoff: unix seconds
  // The round settled a heal: "held" (healthy the round after), "failed
  // again" (not), "finished" (a heal a killed watch left half done ended
  // well), "interrupted" (it did not: this round finishes it). "" when none.
  std::string settled;
  // kHeal of a heal a killed watch left half done: the same try, finished
  // now (no backoff, not counted again toward the limit).
  bool resume = false;
};

// Whether `seen` is busy within its health.busy_grace: its health probe
// timed out while the container runs, for less than the grace. Such a serve
// is neither healed nor counted unhealthy (its smoke checks wait behind the
// same prefill): it is working.
bool BusyWithinGrace(const ServeSeen& seen);

// Rounds in a row the health URL of a serve failed; updated each round.
// Decides for `seen` now (unix seconds), updating `ledger`: tries older than
// the window are dropped, a heal of the round before is settled, a
// quarantine is recorded. `unhealthy_rounds` counts this round already.
// REQUIRES: policy.limit >= 1, policy.backoff_s >= 1.
HealDecision DecideHeal(const RestartPolicy& policy, int grace_rounds, const ServeSeen& seen,
                        int unhealthy_rounds, int64_t now, HealLedger* ledger);

// The wait before the next try after `failed_in_row` tries that did not
// hold: backoff * 2^failed_in_row, at most max_backoff.
int64_t BackoffSeconds(const RestartPolicy& policy, int failed_in_row);

// Notes a try (a heal started, or a wait for memory) at `now`.
void NoteTry(int64_t now, const std::string& detail, HealLedger* ledger);

// What `fleet status` says of a quarantined serve: "3 heals in 30m; last:
// smoke math: got '72 7#7'".
std::string QuarantineText(const RestartPolicy& policy, const HealLedger& ledger);

// Whether free GPU memory `free_bytes` lets a serve start: at least
// `need_bytes` (the deployment's gpu_memory), else at least 90 % of what was
// free before its last good start. *why says what was compared; true when
// neither is known (nothing to compare).
bool MemoryBack(uint64_t free_bytes, uint64_t need_bytes, uint64_t free_before_start_bytes,
                std::string* why);

}  // namespace fleet

#endif  // FLEET_SRC_ENGINE_HEAL_POLICY_H_
