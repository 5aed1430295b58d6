#include "src/engine/heal_policy.h"

#include <algorithm>
#include <cstdio>

#include "manifests/restart_policy.h"

namespace fleet {
namespace {

std::string WindowText(int seconds) {
  if (seconds % 3600 == 0) return std::to_string(seconds / 3600) + "h";
  if (seconds % 60 == 0) return std::to_string(seconds / 60) + "m";
  return std::to_string(seconds) + "s";
}

std::string GiB(uint64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f GiB", bytes / (1024.0 * 1024 * 1024));
  return buf;
}

bool Healthy2xx(int code) { return code >= 200 && code < 300; }

// What the round shows wrong, in the order a heal would mend it; "" reason
// when nothing is.
void WhatIsWrong(int grace_rounds, const ServeSeen& seen, int unhealthy_rounds, std::string* reason,
                 std::string* detail) {
  if (!seen.exists) {
    *reason = "exit";
    *detail = "container gone";
  } else if (seen.state != "running") {
    *reason = "exit";
    *detail = "container " + seen.state + " (exit code " + std::to_string(seen.exit_code) + ")";
  } else if (seen.has_health && !Healthy2xx(seen.health) && unhealthy_rounds >= grace_rounds) {
    *reason = "unhealthy";
    *detail = "health URL " +
              (seen.health == 0 ? std::string("did not answer")
                                : "answered " + std::to_string(seen.health)) +
              " for " + std::to_string(unhealthy_rounds) + " rounds (health.grace " +
              std::to_string(grace_rounds) + ")";
  } else if (!seen.smoke_failure.empty()) {
    *reason = "smoke";
    *detail = seen.smoke_failure;
  }
}

// A heal of an earlier round, settled by what this round saw.
std::string Settle(bool healthy, int64_t now, HealLedger* ledger) {
  if (ledger->in_progress_since != 0) {
    ledger->in_progress_since = 0;
    // Not the serve's failure but the watch's: the heal is finished, not
    // counted as one that did not hold.
    if (!healthy) return "interrupted";
    ledger->failed_in_row = 0;
    ledger->unproven = false;
    ledger->last_try_at = now;
    return "finished";
  }
  if (!ledger->unproven) return "";
  ledger->unproven = false;
  if (healthy) {
    ledger->failed_in_row = 0;
    return "held";
  }
  ++ledger->failed_in_row;
  return "failed again";
}

}  // namespace

int64_t BackoffSeconds(const RestartPolicy& policy, int failed_in_row) {
  if (failed_in_row <= 0) return 0;
  int64_t wait = policy.backoff_s;
  for (int i = 1; i < failed_in_row && wait < policy.max_backoff_s; ++i) wait *= 2;
  return std::min<int64_t>(wait, policy.max_backoff_s);
}

void NoteTry(int64_t now, const std::string& detail, HealLedger* ledger) {
  ledger->tries.push_back(now);
  ledger->last_try_at = now;
  ledger->last_reason = detail;
}

std::string QuarantineText(const RestartPolicy& policy, const HealLedger& ledger) {
  const size_t n = ledger.tries.size();
  if (static_cast<int>(n) < policy.limit)  // quarantined for the tries in a row
    return std::to_string(ledger.failed_in_row) +
           " heals in a row did not hold; last: " + ledger.last_reason;
  return std::to_string(n) + (n == 1 ? " heal" : " heals") + " in " + WindowText(policy.window_s) +
         "; last: " + ledger.last_reason;
}

bool MemoryBack(uint64_t free_bytes, uint64_t need_bytes, uint64_t free_before_start_bytes,
                std::string* why) {
  if (need_bytes > 0) {
    *why = GiB(free_bytes) + " free, needs " + GiB(need_bytes);
    return free_bytes >= need_bytes;
  }
  if (free_before_start_bytes > 0) {
    const uint64_t floor = free_before_start_bytes / 10 * 9;
    *why = GiB(free_bytes) + " free, needs " + GiB(floor) + " (90 % of the " +
           GiB(free_before_start_bytes) + " free before its last good start)";
    return free_bytes >= floor;
  }
  why->clear();
  return true;
}

bool BusyWithinGrace(const ServeSeen& seen) {
  return seen.exists && seen.state == "running" && seen.busy_s >= 0 &&
         seen.busy_s < seen.busy_grace_s;
}

HealDecision DecideHeal(const RestartPolicy& policy, int grace_rounds, const ServeSeen& seen,
                        int unhealthy_rounds, int64_t now, HealLedger* ledger) {
  HealDecision d;
  std::erase_if(ledger->tries, [&](int64_t t) { return t < now - policy.window_s; });
  if (!seen.reachable) {
    d.detail = "node not reachable: nothing to heal from here";
    return d;
  }
  if (BusyWithinGrace(seen)) {
    // Nothing settled either: a heal of the round before is judged when the
    // serve answers again, or when the grace is over.
    d.detail =
        "busy: the health URL gave no answer within the probe's 5 s while the container "
        "runs, for " +
        std::to_string(seen.busy_s) + " s of health.busy_grace " + WindowText(seen.busy_grace_s);
    return d;
  }
  WhatIsWrong(grace_rounds, seen, unhealthy_rounds, &d.reason, &d.detail);
  const bool waiting_grace =
      d.reason.empty() && seen.has_health && !Healthy2xx(seen.health) && seen.exists;
  if (waiting_grace) {
    d.detail = "unhealthy for " + std::to_string(unhealthy_rounds) + " of " +
               std::to_string(grace_rounds) + " rounds (health.grace)";
    return d;
  }
  d.settled = Settle(d.reason.empty(), now, ledger);
  if (d.reason.empty()) return d;
  if (ledger->quarantined) {
    d.action = HealAction::kQuarantined;
    return d;
  }
  if (!RestartPolicyHeals(policy, d.reason)) {
    d.detail += policy.never ? " (restart: never)" : " (restart.on does not list " + d.reason + ")";
    return d;
  }
  if (d.settled == "interrupted") {
    d.action = HealAction::kHeal;
    d.resume = true;
    d.detail = "finishing the heal a stopped watch left: " + d.detail;
    return d;
  }
  // `limit` tries in the window, or `limit` in a row that did not hold,
  // however long each took: with the lab's 15-30 minute boots a window of
  // an hour never holds `limit` tries, and a serve that boots and fails
  // its checks every time would be healed forever.
  if (static_cast<int>(ledger->tries.size()) >= policy.limit ||
      ledger->failed_in_row >= policy.limit) {
    ledger->quarantined = true;
    ledger->quarantined_at = now;
    // "last:" names the last try's reason (a wait for memory says more than
    // the exit that followed it), else what this round found.
    if (ledger->last_reason.empty()) ledger->last_reason = d.detail;
    ledger->quarantine = QuarantineText(policy, *ledger);
    d.action = HealAction::kQuarantine;
    return d;
  }
  const int64_t wait = BackoffSeconds(policy, ledger->failed_in_row);
  if (ledger->last_try_at != 0 && now < ledger->last_try_at + wait) {
    d.action = HealAction::kBackoff;
    d.next_try_at = ledger->last_try_at + wait;
    return d;
  }
  d.action = HealAction::kHeal;
  return d;
}

}  // namespace fleet
