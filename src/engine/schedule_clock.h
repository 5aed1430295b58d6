// When a deployment's `schedule` (manifests/power_policy.h) says up, and
// its next transition, in the schedule's time zone read from the
// controller's tz database (TZif files under /usr/share/zoneinfo or
// $TZDIR; GCC 12 has no std::chrono time zones). `fleet plan` notes each
// scheduled deployment's next transition with it. The windows do not act
// yet: no watch round brings a deployment up or down by them (docs/power.md).
#ifndef FLEET_SRC_ENGINE_SCHEDULE_CLOCK_H_
#define FLEET_SRC_ENGINE_SCHEDULE_CLOCK_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "manifests/manifest.h"
#include "src/plan.h"
#include "src/status.h"

namespace fleet {

// A zone's UTC offsets over time, from its TZif file (version 2 or later:
// the 64-bit transitions). After the last transition the last offset holds
// (Debian's files list transitions up to 2037).
class ZoneOffsets {
 public:
  static Result<ZoneOffsets> Load(const std::string& tz);
  // From a TZif file's bytes (tests); `tz` names it in errors.
  static Result<ZoneOffsets> Parse(const std::string& tz, const std::string& bytes);
  // Seconds east of UTC at `utc` (unix seconds).
  int OffsetAt(int64_t utc) const;

 private:
  std::vector<int64_t> times_;  // transition instants, ascending
  std::vector<int> offsets_;    // the offset from each transition on
  int before_ = 0;              // before the first transition
};

bool ScheduleUpAt(const UpSchedule& schedule, const ZoneOffsets& zone, int64_t utc);

struct ScheduleTransition {
  int64_t at = 0;   // unix seconds, on a minute
  bool up = false;  // what it becomes
};

// The first minute after `utc`, within 8 days, at which ScheduleUpAt
// changes; nullopt when it never does (always up or never up).
std::optional<ScheduleTransition> NextScheduleTransition(const UpSchedule& schedule,
                                                         const ZoneOffsets& zone, int64_t utc);

// "schedule Mon-Fri 08:00-20:00 Europe/Berlin: up now; down at Mon
// 2026-12-07 20:00 Europe/Berlin (19:00 UTC)".
std::string DescribeSchedule(const UpSchedule& schedule, const ZoneOffsets& zone, int64_t utc);

// Adds DescribeSchedule of each scheduled deployment to the reasons of its
// head's change in `plan`, and of each scheduled node to its node's change
// (a note of the plan when nothing changes).
void NoteSchedules(const Manifest& m, int64_t utc, Plan* plan);

}  // namespace fleet

#endif  // FLEET_SRC_ENGINE_SCHEDULE_CLOCK_H_
