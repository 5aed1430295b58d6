#include "manifests/power_policy.h"

#include <sys/stat.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "manifests/duration.h"

namespace fleet {

namespace {

using yaml_schema::Entry;
using yaml_schema::Located;
using yaml_schema::MapReader;
using yaml_schema::Reporter;

const std::vector<std::string> kScheduleKeys = {"up", "tz"};
const std::vector<std::string> kWakeKeys = {"hold", "listener"};
constexpr std::array<const char*, 7> kDayNames = {"Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"};

std::optional<int> DayIndex(std::string_view word) {
  for (size_t i = 0; i < kDayNames.size(); ++i)
    if (word == kDayNames[i]) return static_cast<int>(i);
  return std::nullopt;
}

// "Mon-Fri,Sun" or "daily" -> a mask of days (bit 0 Monday).
std::optional<unsigned> ParseDays(std::string_view text, std::string* why) {
  if (text == "daily") return 0x7Fu;
  unsigned mask = 0;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = std::min(text.find(',', start), text.size());
    const std::string_view part = text.substr(start, comma - start);
    const size_t dash = part.find('-');
    const auto first = DayIndex(part.substr(0, dash));
    const auto last = dash == std::string_view::npos ? first : DayIndex(part.substr(dash + 1));
    if (!first || !last) {
      *why = "'" + std::string(part) +
             "' is not a day or a range of days (Mon, Tue, Wed, Thu, Fri, Sat, Sun; Mon-Fri; "
             "or daily)";
      return std::nullopt;
    }
    for (int d = *first;; d = (d + 1) % 7) {  // Fri-Mon wraps over the weekend
      mask |= 1u << d;
      if (d == *last) break;
    }
    start = comma + 1;
  }
  return mask;
}

// "08:00" -> 480; "24:00" only where allow_24.
std::optional<int> ParseClock(std::string_view text, bool allow_24) {
  if (text.size() != 5 || text[2] != ':') return std::nullopt;
  for (size_t i : {0, 1, 3, 4})
    if (!std::isdigit(static_cast<unsigned char>(text[i]))) return std::nullopt;
  const int h = (text[0] - '0') * 10 + (text[1] - '0');
  const int m = (text[3] - '0') * 10 + (text[4] - '0');
  if (m > 59 || h > 24 || (h == 24 && (m != 0 || !allow_24))) return std::nullopt;
  return h * 60 + m;
}

std::string Clock(int minutes) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "%02d:%02d", minutes / 60, minutes % 60);
  return buf;
}

bool ReadWindows(Reporter* reporter, const MapReader& map, UpSchedule* schedule) {
  const Entry* up = map.Find("up");
  if (up == nullptr) {
    reporter->Error(map.where(), map.what() +
                                     " has no 'up' (required: when it is up, e.g. \"Mon-Fri "
                                     "08:00-20:00\")");
    return false;
  }
  std::vector<Located<std::string>> texts;
  if (up->value.IsSequence()) {
    auto list = map.StringList("up");
    if (!list) return false;
    texts = *list;
  } else if (auto one = map.String("up")) {
    texts.push_back(*one);
  } else {
    return false;
  }
  if (texts.empty()) {
    reporter->Error(up->value_loc, "'up' in " + map.what() + " is empty; list its windows");
    return false;
  }
  bool ok = true;
  std::string shown;
  for (const Located<std::string>& text : texts) {
    std::string why;
    if (auto window = ParseScheduleWindow(text.value, &why)) {
      schedule->windows.push_back(*window);
    } else {
      reporter->Error(text.loc,
                      "'up' in " + map.what() + ": " + why + ", got '" + text.value + "'");
      ok = false;
    }
    shown += (shown.empty() ? "" : ", ") + text.value;
  }
  schedule->up = shown;
  return ok;
}

}  // namespace

std::optional<ScheduleWindow> ParseScheduleWindow(std::string_view text, std::string* why) {
  std::istringstream in{std::string(text)};
  std::string days_word, times_word, extra;
  in >> days_word >> times_word;
  if (days_word.empty() || times_word.empty() || (in >> extra)) {
    *why =
        "a window is \"DAYS HH:MM-HH:MM\", e.g. \"Mon-Fri 08:00-20:00\" or \"daily 22:00-06:00\"";
    return std::nullopt;
  }
  ScheduleWindow w;
  const auto days = ParseDays(days_word, why);
  if (!days) return std::nullopt;
  w.days = *days;
  const size_t dash = times_word.find('-');
  const auto start =
      dash == std::string::npos ? std::nullopt : ParseClock(times_word.substr(0, dash), false);
  const auto end =
      dash == std::string::npos ? std::nullopt : ParseClock(times_word.substr(dash + 1), true);
  if (!start || !end) {
    *why = "'" + times_word + "' is not a time range HH:MM-HH:MM (00:00 to 24:00)";
    return std::nullopt;
  }
  if (*start == *end || (*start == 0 && *end == 0)) {
    *why = "'" + times_word + "' starts where it ends; for a whole day write 00:00-24:00";
    return std::nullopt;
  }
  w.start_min = *start;
  w.end_min = *end;
  return w;
}

bool KnownTimeZone(const std::string& tz) {
  if (tz.empty() || tz.front() == '/' || tz.find("..") != std::string::npos) return false;
  for (char c : tz)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '+' && c != '-' &&
        c != '/')
      return false;
  if (tz == "UTC") return true;
  const char* dir = std::getenv("TZDIR");
  const std::string path = std::string(dir && *dir ? dir : "/usr/share/zoneinfo") + "/" + tz;
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

bool ReadUpSchedule(Reporter* reporter, const Entry& entry, const std::string& what,
                    UpSchedule* schedule) {
  const MapReader map(reporter, entry.value, what + " schedule", entry.key_loc);
  if (!map.ok()) return false;
  map.CheckKeys(kScheduleKeys);
  schedule->present = true;
  schedule->loc = entry.key_loc;
  schedule->tz = "UTC";
  bool ok = ReadWindows(reporter, map, schedule);
  if (auto tz = map.String("tz")) {
    if (KnownTimeZone(tz->value)) {
      schedule->tz = tz->value;
    } else {
      reporter->Error(tz->loc, "'tz' in " + map.what() +
                                   " is not a time zone this machine knows (an IANA name such "
                                   "as Europe/Berlin or UTC, see /usr/share/zoneinfo), got '" +
                                   tz->value + "'");
      ok = false;
    }
  }
  return ok;
}

bool ReadGatewayWake(Reporter* reporter, const Entry& entry, const std::string& what,
                     GatewayWake* wake) {
  const MapReader map(reporter, entry.value, what + " wake", entry.key_loc);
  if (!map.ok()) return false;
  map.CheckKeys(kWakeKeys);
  wake->present = true;
  wake->loc = entry.key_loc;
  bool ok = true;
  if (auto hold = map.String("hold")) {
    const auto seconds = ParseDurationSeconds(hold->value);
    if (seconds && *seconds <= 3600) {
      wake->hold_s = *seconds;
    } else {
      reporter->Error(hold->loc, "'hold' in " + map.what() +
                                     " must be a duration from 1s to 1h such as 10m (how long a "
                                     "request may wait for its model to wake), got '" +
                                     hold->value + "'");
      ok = false;
    }
  }
  auto listener = map.RequiredString(
      "listener", "where the gateway reaches `fleet watch --wake-listen`, e.g. 10.0.0.1:9101");
  if (!listener) return false;
  const std::string& text = listener->value;
  const size_t colon = text.rfind(':');
  std::string host = colon == std::string::npos ? "" : text.substr(0, colon);
  const std::string port = colon == std::string::npos ? "" : text.substr(colon + 1);
  bool host_ok = !host.empty() && host.size() <= 253;
  for (char c : host)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '-') host_ok = false;
  bool port_ok = !port.empty() && port.size() <= 5;
  for (char c : port)
    if (!std::isdigit(static_cast<unsigned char>(c))) port_ok = false;
  const int port_number = port_ok ? std::atoi(port.c_str()) : 0;
  if (!host_ok || port_number < 1 || port_number > 65535) {
    reporter->Error(listener->loc, "'listener' in " + map.what() +
                                       " must be HOST:PORT (a name or IPv4 address the "
                                       "gateway's nodes reach, and a port 1-65535), got '" +
                                       text + "'");
    return false;
  }
  wake->listener_host = host;
  wake->listener_port = port_number;
  return ok;
}

std::string ShowScheduleWindow(const ScheduleWindow& window) {
  std::string days;
  if (window.days == 0x7Fu) {
    days = "daily";
  } else {
    for (int d = 0; d < 7;) {
      if (!(window.days & (1u << d))) {
        ++d;
        continue;
      }
      int last = d;
      while (last + 1 < 7 && (window.days & (1u << (last + 1)))) ++last;
      days += (days.empty() ? "" : ",") + std::string(kDayNames[d]);
      if (last > d) days += "-" + std::string(kDayNames[last]);
      d = last + 1;
    }
  }
  return days + " " + Clock(window.start_min) + "-" + Clock(window.end_min);
}

}  // namespace fleet
