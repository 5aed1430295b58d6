#include "manifests/duration.h"

#include <gtest/gtest.h>

namespace fleet {
namespace {

TEST(DurationTest, UnitsAndPlainSeconds) {
  EXPECT_EQ(ParseDurationSeconds("90"), 90);
  EXPECT_EQ(ParseDurationSeconds("90s"), 90);
  EXPECT_EQ(ParseDurationSeconds("10m"), 600);
  EXPECT_EQ(ParseDurationSeconds("2h"), 7200);
  EXPECT_EQ(ParseDurationSeconds("1h30m"), 5400);
  EXPECT_EQ(ParseDurationSeconds("1h30m15s"), 5415);
}

TEST(DurationTest, WhatIsNotADuration) {
  for (const char* bad :
       {"", "s", "1.5m", "-1s", "+1s", "1d", "1h30", "10 m", "m10", "3000000000", "600000h", " 1s"})
    EXPECT_EQ(ParseDurationSeconds(bad), std::nullopt) << "'" << bad << "'";
}

TEST(DurationTest, ZeroOnlyWhereTheCallerAllowsIt) {
  // Timeouts (the default) refuse zero; a skippable wait passes 0.
  for (const char* zero : {"0", "0s", "0m", "00h", "0h0m"}) {
    EXPECT_EQ(ParseDurationSeconds(zero), std::nullopt) << zero;
    EXPECT_EQ(ParseDurationSeconds(zero, 0), 0) << zero;
  }
  EXPECT_EQ(ParseDurationSeconds("59s", 60), std::nullopt);
  EXPECT_EQ(ParseDurationSeconds("1m", 60), 60);
}

}  // namespace
}  // namespace fleet
