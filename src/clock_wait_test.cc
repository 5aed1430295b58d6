#include "src/clock_wait.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "src/fake_clock.h"

namespace fleet {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

TEST(WaitOnClock, ADoneConditionEndsTheWaitWithoutASleep) {
  FakeClock clock;
  EXPECT_TRUE(WaitOnClock(&clock, clock.SteadyNow() + seconds(30), [] { return true; }));
  EXPECT_EQ(clock.sleeps(), 0);
}

TEST(WaitOnClock, OnAFakeClockAWaitThatNeverEndsRunsOutAtOnce) {
  FakeClock clock;
  const auto start = clock.SteadyNow();
  EXPECT_FALSE(WaitOnClock(&clock, start + seconds(30), [] { return false; }));
  EXPECT_EQ(clock.SteadyNow() - start, seconds(30));  // slept to the deadline, not past it
  EXPECT_EQ(clock.sleeps(), 300);                     // in 100 ms looks
}

TEST(WaitOnClock, TheConditionIsSeenWhenTheClockSaysItHappened) {
  FakeClock clock;
  const auto start = clock.SteadyNow();
  // "The heal ends 2.5 s in": true from then on.
  auto done = [&] { return clock.SteadyNow() - start >= milliseconds(2500); };
  EXPECT_TRUE(WaitOnClock(&clock, start + seconds(30), done));
  EXPECT_EQ(clock.SteadyNow() - start, milliseconds(2500));
}

TEST(WaitOnClock, APastDeadlineLooksOnceAndDoesNotSleep) {
  FakeClock clock;
  int looks = 0;
  EXPECT_FALSE(WaitOnClock(&clock, clock.SteadyNow(), [&] {
    ++looks;
    return false;
  }));
  EXPECT_EQ(looks, 1);
  EXPECT_EQ(clock.sleeps(), 0);
}

TEST(WaitOnClock, OnTheRealClockAnotherThreadEndsTheWait) {
  std::atomic<bool> flag{false};
  std::thread setter([&] {
    RealClock()->SleepFor(milliseconds(50));
    flag = true;
  });
  const auto start = RealClock()->SteadyNow();
  EXPECT_TRUE(WaitOnClock(
      RealClock(), start + seconds(30), [&] { return flag.load(); }, milliseconds(5)));
  setter.join();
  EXPECT_LT(RealClock()->SteadyNow() - start, seconds(10));  // not the whole 30 s
}

}  // namespace
}  // namespace fleet
