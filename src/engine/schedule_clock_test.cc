#include "src/engine/schedule_clock.h"

#include <gtest/gtest.h>

#include "manifests/power_policy.h"

namespace fleet {
namespace {

UpSchedule Schedule(const std::vector<std::string>& windows, const std::string& tz) {
  UpSchedule s;
  s.present = true;
  s.tz = tz;
  for (const std::string& w : windows) {
    std::string why;
    s.windows.push_back(*ParseScheduleWindow(w, &why));
  }
  return s;
}

// 2026-12-07 (a Monday) 07:00 UTC = 08:00 in Berlin (CET, +1).
constexpr int64_t kMonday0700Utc = 1796626800;

TEST(ScheduleClock, BerlinOffsetsFollowDaylightSavingTime) {
  auto z = ZoneOffsets::Load("Europe/Berlin");
  ASSERT_TRUE(z.ok()) << z.status().message();
  EXPECT_EQ(z->OffsetAt(kMonday0700Utc), 3600);                // December: CET
  EXPECT_EQ(z->OffsetAt(kMonday0700Utc - 150 * 86400), 7200);  // July: CEST
  EXPECT_FALSE(ZoneOffsets::Load("Europe/Nowhere").ok());
  EXPECT_FALSE(ZoneOffsets::Parse("x", "not a tzif file").ok());
}

TEST(ScheduleClock, AWorkdayWindowInBerlin) {
  const UpSchedule s = Schedule({"Mon-Fri 08:00-20:00"}, "Europe/Berlin");
  const ZoneOffsets z = *ZoneOffsets::Load("Europe/Berlin");
  EXPECT_TRUE(ScheduleUpAt(s, z, kMonday0700Utc));               // Mon 08:00 local
  EXPECT_FALSE(ScheduleUpAt(s, z, kMonday0700Utc - 60));         // Mon 07:59
  EXPECT_FALSE(ScheduleUpAt(s, z, kMonday0700Utc + 12 * 3600));  // Mon 20:00
  EXPECT_FALSE(ScheduleUpAt(s, z, kMonday0700Utc - 2 * 86400));  // Saturday
  const auto next = NextScheduleTransition(s, z, kMonday0700Utc + 3600);
  ASSERT_TRUE(next);
  EXPECT_FALSE(next->up);
  EXPECT_EQ(next->at, kMonday0700Utc + 12 * 3600);
  EXPECT_EQ(DescribeSchedule(s, z, kMonday0700Utc + 3600),
            "schedule Mon-Fri 08:00-20:00 Europe/Berlin: up now; down at Mon 2026-12-07 20:00 "
            "Europe/Berlin (19:00 UTC)");
  // Friday evening: up again on Monday morning.
  const auto monday = NextScheduleTransition(s, z, kMonday0700Utc - 3 * 86400 + 13 * 3600);
  ASSERT_TRUE(monday);
  EXPECT_TRUE(monday->up);
  EXPECT_EQ(monday->at, kMonday0700Utc);
}

TEST(ScheduleClock, ANightShiftRunsPastMidnight) {
  const UpSchedule s = Schedule({"Mon-Fri 22:00-06:00"}, "UTC");
  const ZoneOffsets z = *ZoneOffsets::Load("UTC");
  const int64_t monday = kMonday0700Utc - 7 * 3600;            // Mon 00:00 UTC
  EXPECT_FALSE(ScheduleUpAt(s, z, monday + 3600));             // Mon 01:00: Sunday's night is off
  EXPECT_TRUE(ScheduleUpAt(s, z, monday + 23 * 3600));         // Mon 23:00
  EXPECT_TRUE(ScheduleUpAt(s, z, monday + 29 * 3600));         // Tue 05:00
  EXPECT_FALSE(ScheduleUpAt(s, z, monday + 30 * 3600));        // Tue 06:00
  EXPECT_TRUE(ScheduleUpAt(s, z, monday + 5 * 86400 + 3600));  // Sat 01:00: Friday's night
  EXPECT_FALSE(NextScheduleTransition(Schedule({"daily 00:00-24:00"}, "UTC"), z, monday));
}

}  // namespace
}  // namespace fleet
