#include "src/engine/schedule_clock.h"

#include <algorithm>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <sstream>

#include "manifests/power_policy.h"

namespace fleet {

namespace {

int64_t BigEndian(const std::string& b, size_t at, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v = (v << 8) | static_cast<unsigned char>(b[at + i]);
  if (bytes == 4) return static_cast<int32_t>(static_cast<uint32_t>(v));
  return static_cast<int64_t>(v);
}

// "Mon 2026-12-07 20:00" of a local instant (unix seconds + offset).
std::string LocalText(int64_t local) {
  const std::time_t t = static_cast<std::time_t>(local);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%a %Y-%m-%d %H:%M", &tm);
  return buf;
}

}  // namespace

Result<ZoneOffsets> ZoneOffsets::Parse(const std::string& tz, const std::string& b) {
  auto bad = [&](const std::string& why) {
    return Result<ZoneOffsets>::Error("time zone " + tz + ": " + why);
  };
  // Header: "TZif", version, 15 reserved, then six 32-bit counts.
  auto counts = [&](size_t at, int64_t c[6]) {
    for (int i = 0; i < 6; ++i) c[i] = BigEndian(b, at + 20 + 4 * i, 4);
  };
  if (b.size() < 44 || b.compare(0, 4, "TZif") != 0) return bad("not a TZif file");
  if (b[4] < '2') return bad("a version 1 TZif file (no 64-bit transitions)");
  int64_t c[6];  // isutcnt, isstdcnt, leapcnt, timecnt, typecnt, charcnt
  counts(0, c);
  const size_t v1 = 44 + c[3] * 5 + c[4] * 6 + c[5] + c[2] * 8 + c[1] + c[0];
  if (b.size() < v1 + 44 || b.compare(v1, 4, "TZif") != 0) return bad("no second header");
  counts(v1, c);
  const int64_t timecnt = c[3], typecnt = c[4];
  const size_t times_at = v1 + 44, idx_at = times_at + timecnt * 8, types_at = idx_at + timecnt;
  if (typecnt < 1 || b.size() < types_at + typecnt * 6) return bad("truncated");
  std::vector<int> type_offsets;
  for (int64_t i = 0; i < typecnt; ++i)
    type_offsets.push_back(static_cast<int>(BigEndian(b, types_at + i * 6, 4)));
  ZoneOffsets z;
  z.before_ = type_offsets[0];
  for (int64_t i = 0; i < timecnt; ++i) {
    const int type = static_cast<unsigned char>(b[idx_at + i]);
    if (type >= typecnt) return bad("a transition to no type");
    z.times_.push_back(BigEndian(b, times_at + i * 8, 8));
    z.offsets_.push_back(type_offsets[type]);
  }
  return z;
}

Result<ZoneOffsets> ZoneOffsets::Load(const std::string& tz) {
  if (!KnownTimeZone(tz)) return Result<ZoneOffsets>::Error("unknown time zone " + tz);
  if (tz == "UTC") return ZoneOffsets();
  const char* dir = std::getenv("TZDIR");
  std::ifstream in(std::string(dir && *dir ? dir : "/usr/share/zoneinfo") + "/" + tz,
                   std::ios::binary);
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return Parse(tz, bytes.str());
}

int ZoneOffsets::OffsetAt(int64_t utc) const {
  const auto it = std::upper_bound(times_.begin(), times_.end(), utc);
  if (it == times_.begin()) return before_;
  return offsets_[it - times_.begin() - 1];
}

bool ScheduleUpAt(const UpSchedule& schedule, const ZoneOffsets& zone, int64_t utc) {
  const int64_t local = utc + zone.OffsetAt(utc);
  const int64_t day = local >= 0 ? local / 86400 : (local - 86399) / 86400;
  const int weekday = static_cast<int>(((day + 3) % 7 + 7) % 7);  // 1970-01-01: a Thursday
  const int minute = static_cast<int>((local - day * 86400) / 60);
  const int yesterday = (weekday + 6) % 7;
  for (const ScheduleWindow& w : schedule.windows) {
    const bool today = w.days & (1u << weekday);
    if (w.end_min > w.start_min) {
      if (today && minute >= w.start_min && minute < w.end_min) return true;
    } else if ((today && minute >= w.start_min) ||
               ((w.days & (1u << yesterday)) && minute < w.end_min)) {
      return true;  // a night shift, from its evening or into its morning
    }
  }
  return false;
}

std::optional<ScheduleTransition> NextScheduleTransition(const UpSchedule& schedule,
                                                         const ZoneOffsets& zone, int64_t utc) {
  const bool now = ScheduleUpAt(schedule, zone, utc);
  for (int64_t t = utc - utc % 60 + 60; t <= utc + 8 * 86400; t += 60)
    if (ScheduleUpAt(schedule, zone, t) != now) return ScheduleTransition{t, !now};
  return std::nullopt;
}

std::string DescribeSchedule(const UpSchedule& schedule, const ZoneOffsets& zone, int64_t utc) {
  std::string windows;
  for (const ScheduleWindow& w : schedule.windows)
    windows += (windows.empty() ? "" : ", ") + ShowScheduleWindow(w);
  std::string s = "schedule " + windows + " " + schedule.tz + ": " +
                  (ScheduleUpAt(schedule, zone, utc) ? "up" : "down") + " now";
  if (const auto next = NextScheduleTransition(schedule, zone, utc))
    s += "; " + std::string(next->up ? "up" : "down") + " at " +
         LocalText(next->at + zone.OffsetAt(next->at)) + " " + schedule.tz + " (" +
         LocalText(next->at).substr(15) + " UTC)";
  return s;
}

void NoteSchedules(const Manifest& m, int64_t utc, Plan* plan) {
  for (const auto& [name, d] : m.deployments) {
    if (!d.schedule.present || d.nodes.empty()) continue;
    Result<ZoneOffsets> zone = ZoneOffsets::Load(d.schedule.tz);
    const std::string note = zone.ok() ? DescribeSchedule(d.schedule, *zone, utc)
                                       : "schedule: " + zone.status().message();
    for (PlanChange& c : plan->changes)
      if (c.address == "deployment." + name + "@" + d.nodes.front()) c.reasons.push_back(note);
  }
  for (const auto& [name, n] : m.nodes) {
    if (!n.schedule.present) continue;
    Result<ZoneOffsets> zone = ZoneOffsets::Load(n.schedule.tz);
    const std::string note = zone.ok() ? DescribeSchedule(n.schedule, *zone, utc)
                                       : "schedule: " + zone.status().message();
    for (PlanChange& c : plan->changes)
      if (c.address == "node." + name) c.reasons.push_back(note);
  }
}

}  // namespace fleet
