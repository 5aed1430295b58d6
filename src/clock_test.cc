#include "src/clock.h"

#include <gtest/gtest.h>

#include <thread>

#include "src/fake_clock.h"

namespace fleet {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

TEST(FakeClockTest, TimeMovesOnlyWhenTold) {
  FakeClock clock;
  const auto steady = clock.SteadyNow();
  const auto wall = clock.WallNow();
  EXPECT_EQ(clock.SteadyNow(), steady);
  clock.SleepFor(seconds(900));
  EXPECT_EQ(clock.SteadyNow() - steady, seconds(900));
  EXPECT_EQ(clock.WallNow() - wall, seconds(900));
  clock.Advance(milliseconds(5));
  EXPECT_EQ(clock.Elapsed(), seconds(900) + milliseconds(5));
  EXPECT_EQ(clock.sleeps(), 1);
}

TEST(FakeClockTest, OnSleepRunsAfterEverySleep) {
  FakeClock clock;
  int calls = 0;
  clock.OnSleep([&] { ++calls; });
  clock.SleepFor(milliseconds(1));
  clock.SleepFor(milliseconds(-1));  // a negative sleep does not move time
  EXPECT_EQ(calls, 2);
  EXPECT_EQ(clock.Elapsed(), milliseconds(1));
}

TEST(ClockTest, Rfc3339AndUnixSeconds) {
  FakeClock clock;
  EXPECT_EQ(Rfc3339Utc(clock.WallNow()), "2026-01-01T00:00:00Z");
  EXPECT_EQ(clock.UnixSeconds(), 1767225600);
}

TEST(ClockTest, RealClockSleeps) {
  Clock* clock = RealClock();
  const auto start = clock->SteadyNow();
  clock->SleepFor(milliseconds(2));
  EXPECT_GE(clock->SteadyNow() - start, milliseconds(2));
  EXPECT_GT(clock->UnixSeconds(), 1700000000);
}

TEST(FakeClockTest, WaitOnMovesTimeInsteadOfWaiting) {
  FakeClock clock;
  std::mutex mu;
  std::condition_variable cv;
  std::unique_lock<std::mutex> lock(mu);
  bool ready = false;
  // Not ready: the whole wait passes on the fake clock, none of it real.
  EXPECT_FALSE(clock.WaitOn(cv, lock, seconds(3), [&] { return ready; }));
  EXPECT_EQ(clock.Elapsed(), seconds(3));
  EXPECT_TRUE(lock.owns_lock());
  // Made ready by the sleep's hook (a notifier elsewhere): true.
  clock.OnSleep([&] {
    std::lock_guard<std::mutex> l(mu);
    ready = true;
  });
  EXPECT_TRUE(clock.WaitOn(cv, lock, seconds(3), [&] { return ready; }));
  // Ready already: no time passes.
  EXPECT_TRUE(clock.WaitOn(cv, lock, seconds(3), [&] { return ready; }));
  EXPECT_EQ(clock.Elapsed(), seconds(6));
}

TEST(ClockTest, RealClockWaitOnEndsAtTheNotify) {
  Clock* clock = RealClock();
  std::mutex mu;
  std::condition_variable cv;
  bool ready = false;
  std::thread notifier([&] {
    clock->SleepFor(milliseconds(20));
    std::lock_guard<std::mutex> l(mu);
    ready = true;
    cv.notify_all();
  });
  std::unique_lock<std::mutex> lock(mu);
  const auto start = clock->SteadyNow();
  // A minute's wait that the notify ends after about 20 ms.
  EXPECT_TRUE(clock->WaitOn(cv, lock, seconds(60), [&] { return ready; }));
  EXPECT_LT(clock->SteadyNow() - start, seconds(30));
  lock.unlock();
  notifier.join();
  // Nothing notifies: false after the whole wait.
  lock.lock();
  ready = false;
  EXPECT_FALSE(clock->WaitOn(cv, lock, milliseconds(5), [&] { return ready; }));
}

}  // namespace
}  // namespace fleet
