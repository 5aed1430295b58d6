#include "src/clock.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace fleet
