#include "src/engine/heal_policy.h"

#include <gtest/gtest.h>

namespace fleet {
namespace {

RestartPolicy Policy() {
  RestartPolicy p;
  p.backoff_s = 30;
  p.max_backoff_s = 100;
  p.limit = 3;
  p.window_s = 1800;
  return p;
}

ServeSeen Healthy() {
  ServeSeen s;
  s.exists = true;
  s.state = "running";
  s.health = 200;
  return s;
}

ServeSeen Exited() {
  ServeSeen s = Healthy();
  s.state = "exited";
  s.exit_code = 137;
  return s;
}

TEST(HealPolicy, HealthyServeNeedsNothing) {
  HealLedger l;
  HealDecision d = DecideHeal(Policy(), 2, Healthy(), 0, 1000, &l);
  EXPECT_EQ(d.action, HealAction::kNone);
  EXPECT_EQ(d.reason, "");
  EXPECT_TRUE(l.Empty());
}

TEST(HealPolicy, ExitedOrGoneHealsAtOnce) {
  HealLedger l;
  HealDecision d = DecideHeal(Policy(), 2, Exited(), 0, 1000, &l);
  EXPECT_EQ(d.action, HealAction::kHeal);
  EXPECT_EQ(d.reason, "exit");
  EXPECT_EQ(d.detail, "container exited (exit code 137)");
  ServeSeen gone;
  gone.exists = false;
  EXPECT_EQ(DecideHeal(Policy(), 2, gone, 0, 1000, &l).detail, "container gone");
}

// A health probe that times out while the container runs: a long prefill
// holds the engine (the 500K-token prompt), not a dead serve.
TEST(HealPolicy, BusyWithinItsGraceIsNeitherHealedNorUnhealthy) {
  ServeSeen s = Healthy();
  s.health = 0;
  s.busy_s = 120;
  s.busy_grace_s = 600;
  s.smoke_failure = "smoke math: Timeout was reached";  // waits behind the same prefill
  HealLedger l;
  HealDecision d = DecideHeal(Policy(), 2, s, 5, 1000, &l);
  EXPECT_EQ(d.action, HealAction::kNone);
  EXPECT_EQ(d.reason, "");
  EXPECT_EQ(d.detail,
            "busy: the health URL gave no answer within the probe's 5 s while the container "
            "runs, for 120 s of health.busy_grace 10m");
  EXPECT_TRUE(l.Empty());
  // Past the grace it is unhealthy like any failure.
  s.busy_s = 600;
  d = DecideHeal(Policy(), 2, s, 5, 1000, &l);
  EXPECT_EQ(d.action, HealAction::kHeal);
  EXPECT_EQ(d.reason, "unhealthy");
  // No grace declared: a timeout is unhealthy at once (after health.grace).
  ServeSeen t = Healthy();
  t.health = 0;
  t.busy_s = 0;
  HealLedger l2;
  EXPECT_EQ(DecideHeal(Policy(), 2, t, 2, 1000, &l2).action, HealAction::kHeal);
  // A container that exited is healed whatever its last probe said.
  ServeSeen e = Exited();
  e.busy_s = 10;
  e.busy_grace_s = 600;
  HealLedger l3;
  EXPECT_EQ(DecideHeal(Policy(), 2, e, 0, 1000, &l3).action, HealAction::kHeal);
}

TEST(HealPolicy, UnhealthyWaitsForGraceRounds) {
  ServeSeen s = Healthy();
  s.health = 0;
  HealLedger l;
  EXPECT_EQ(DecideHeal(Policy(), 2, s, 1, 1000, &l).action, HealAction::kNone);
  HealDecision d = DecideHeal(Policy(), 2, s, 2, 1000, &l);
  EXPECT_EQ(d.action, HealAction::kHeal);
  EXPECT_EQ(d.reason, "unhealthy");
}

TEST(HealPolicy, SmokeFailureHeals) {
  ServeSeen s = Healthy();
  s.smoke_failure = "smoke math: got '72 7#7'";
  HealLedger l;
  HealDecision d = DecideHeal(Policy(), 2, s, 0, 1000, &l);
  EXPECT_EQ(d.action, HealAction::kHeal);
  EXPECT_EQ(d.reason, "smoke");
}

TEST(HealPolicy, OnListAndNeverAreObeyed) {
  RestartPolicy p = Policy();
  p.on = {"exit"};
  ServeSeen s = Healthy();
  s.smoke_failure = "smoke math: wrong";
  HealLedger l;
  HealDecision d = DecideHeal(p, 2, s, 0, 1000, &l);
  EXPECT_EQ(d.action, HealAction::kNone);
  EXPECT_NE(d.detail.find("restart.on does not list smoke"), std::string::npos);
  p.never = true;
  EXPECT_EQ(DecideHeal(p, 2, Exited(), 0, 1000, &l).action, HealAction::kNone);
}

TEST(HealPolicy, UnreachableNodeIsNotHealedNorSettled) {
  ServeSeen s;
  s.reachable = false;
  HealLedger l;
  l.unproven = true;
  EXPECT_EQ(DecideHeal(Policy(), 2, s, 0, 1000, &l).action, HealAction::kNone);
  EXPECT_TRUE(l.unproven);
}

TEST(HealPolicy, BackoffDoublesAfterHealsThatDidNotHoldAndIsCapped) {
  RestartPolicy p = Policy();
  EXPECT_EQ(BackoffSeconds(p, 0), 0);
  EXPECT_EQ(BackoffSeconds(p, 1), 30);
  EXPECT_EQ(BackoffSeconds(p, 2), 60);
  EXPECT_EQ(BackoffSeconds(p, 3), 100);
  EXPECT_EQ(BackoffSeconds(p, 40), 100);
  p.limit = 10;
  HealLedger l;
  NoteTry(1000, "exit", &l);
  l.unproven = true;  // healed at 1000
  // Failed again the next round: the heal did not hold, wait 30 s.
  HealDecision d = DecideHeal(p, 2, Exited(), 0, 1010, &l);
  EXPECT_EQ(d.settled, "failed again");
  EXPECT_EQ(d.action, HealAction::kBackoff);
  EXPECT_EQ(d.next_try_at, 1030);
  EXPECT_EQ(DecideHeal(p, 2, Exited(), 0, 1030, &l).action, HealAction::kHeal);
}

TEST(HealPolicy, AHeldHealResetsTheBackoff) {
  HealLedger l;
  NoteTry(1000, "exit", &l);
  l.failed_in_row = 2;
  l.unproven = true;
  HealDecision d = DecideHeal(Policy(), 2, Healthy(), 0, 1010, &l);
  EXPECT_EQ(d.settled, "held");
  EXPECT_EQ(l.failed_in_row, 0);
  // A failure much later heals at once.
  EXPECT_EQ(DecideHeal(Policy(), 2, Exited(), 0, 1020, &l).action, HealAction::kHeal);
}

// The lab's boots take 15-30 minutes: a window of an hour never holds
// `limit` tries, yet a serve that boots and fails its checks after every
// heal is quarantined once `limit` heals in a row did not hold.
TEST(HealPolicy, LimitInARowQuarantinesWhenBootsOutlastTheWindow) {
  RestartPolicy p = Policy();
  p.limit = 5;
  p.window_s = 3600;
  HealLedger l;
  int heals = 0;
  HealDecision d;
  for (int i = 0; i < 20; ++i) {
    const int64_t now = 1000 + i * 1200;  // a 15-minute boot, checks, backoff: 20 minutes a try
    d = DecideHeal(p, 2, Exited(), 0, now, &l);
    if (d.action == HealAction::kQuarantine) break;
    ASSERT_EQ(d.action, HealAction::kHeal) << i << " " << d.detail;
    NoteTry(now, "smoke math: got 'x'", &l);
    l.unproven = true;  // it booted; the next round finds it failing again
    ++heals;
    EXPECT_LT(l.tries.size(), 5u);  // the window never holds the limit
  }
  EXPECT_EQ(d.action, HealAction::kQuarantine);
  EXPECT_EQ(heals, 5);
  EXPECT_EQ(l.quarantine, "5 heals in a row did not hold; last: smoke math: got 'x'");
}

TEST(HealPolicy, LimitWithinTheWindowQuarantines) {
  RestartPolicy p = Policy();
  p.backoff_s = 1;
  p.max_backoff_s = 1;
  HealLedger l;
  int64_t now = 1000;
  for (int i = 0; i < 3; ++i) {
    HealDecision d = DecideHeal(p, 2, Exited(), 0, now, &l);
    ASSERT_EQ(d.action, HealAction::kHeal) << i;
    NoteTry(now, d.detail, &l);
    l.unproven = true;
    now += 10;
  }
  HealDecision d = DecideHeal(p, 2, Exited(), 0, now, &l);
  EXPECT_EQ(d.action, HealAction::kQuarantine);
  EXPECT_TRUE(l.quarantined);
  EXPECT_EQ(l.quarantine, "3 heals in 30m; last: container exited (exit code 137)");
  // No try after a quarantine, however long it is failing.
  for (int i = 0; i < 5; ++i)
    EXPECT_EQ(DecideHeal(p, 2, Exited(), 0, now += 10, &l).action, HealAction::kQuarantined);
}

TEST(HealPolicy, TriesOutsideTheWindowDoNotCount) {
  RestartPolicy p = Policy();
  HealLedger l;
  l.tries = {0, 10, 20};
  l.last_try_at = 20;
  HealDecision d = DecideHeal(p, 2, Exited(), 0, 20 + 1800 + 1, &l);
  EXPECT_EQ(d.action, HealAction::kHeal);
  EXPECT_TRUE(l.tries.empty());
}

TEST(HealPolicy, AHealAKilledWatchLeftIsFinishedOrCounted) {
  HealLedger l;
  NoteTry(1000, "exit", &l);
  l.in_progress_since = 1000;
  HealDecision d = DecideHeal(Policy(), 2, Healthy(), 0, 1010, &l);
  EXPECT_EQ(d.settled, "finished");
  EXPECT_EQ(l.in_progress_since, 0);
  // Left exited: the next round finishes it at once, as the same try (the
  // watch died, not the serve: no backoff, no second count).
  HealLedger broken;
  NoteTry(1000, "exit", &broken);
  broken.in_progress_since = 1000;
  d = DecideHeal(Policy(), 2, Exited(), 0, 1001, &broken);
  EXPECT_EQ(d.settled, "interrupted");
  EXPECT_EQ(d.action, HealAction::kHeal);
  EXPECT_TRUE(d.resume);
  EXPECT_EQ(broken.in_progress_since, 0);
  EXPECT_EQ(broken.failed_in_row, 0);
  EXPECT_EQ(broken.tries.size(), 1u);
}

TEST(HealPolicy, MemoryMustBeBack) {
  const uint64_t gib = 1024ull * 1024 * 1024;
  std::string why;
  EXPECT_FALSE(MemoryBack(41 * gib, 96 * gib, 0, &why));
  EXPECT_EQ(why, "41.0 GiB free, needs 96.0 GiB");
  EXPECT_TRUE(MemoryBack(100 * gib, 96 * gib, 0, &why));
  EXPECT_FALSE(MemoryBack(80 * gib, 0, 100 * gib, &why));
  EXPECT_TRUE(MemoryBack(95 * gib, 0, 100 * gib, &why));
  EXPECT_TRUE(MemoryBack(1, 0, 0, &why));
  EXPECT_EQ(why, "");
}

}  // namespace
}  // namespace fleet
