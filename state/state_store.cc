// Backend-independent helpers of StateStore (see state/state_store.h).
#include "state/state_store.h"

#include <openssl/rand.h>
#include <pwd.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <optional>
#include <random>

#include "state/state.h"

namespace fleet {

Result<std::unique_ptr<StateLock>> LockWithTimeout(StateStore* store, const std::string& operation,
                                                   int64_t timeout_ms, Clock* clock) {
  const auto deadline = clock->SteadyNow() + std::chrono::milliseconds(timeout_ms);
  auto pause = std::chrono::milliseconds(100);
  for (;;) {
    Result<std::unique_ptr<StateLock>> lock = store->Lock(operation);
    if (lock.ok() || clock->SteadyNow() >= deadline) return lock;
    // Only a held lock is worth waiting for; a broken store is not.
    if (!lock.status().lock_held()) return lock;
    clock->SleepFor(std::min<std::chrono::nanoseconds>(pause, deadline - clock->SteadyNow()));
    pause = std::min(pause * 2, std::chrono::milliseconds(2000));
  }
}

namespace {

std::string RandomHex(size_t bytes) {
  std::string raw(bytes, '\0');
  if (RAND_bytes(reinterpret_cast<unsigned char*>(raw.data()), static_cast<int>(bytes)) != 1) {
    // Only uniqueness matters for a lock id; fall back to the OS generator.
    std::random_device rd;
    for (auto& c : raw) c = static_cast<char>(rd());
  }
  static const char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes * 2);
  for (unsigned char c : raw) {
    out.push_back(kHex[c >> 4]);
    out.push_back(kHex[c & 15]);
  }
  return out;
}

}  // namespace

std::string ProcessHostName() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof(buf) - 1) != 0) return "unknown-host";
  return buf;
}

std::string ProcessUserName() {
  uid_t uid = ::geteuid();
  struct passwd pw;
  struct passwd* found = nullptr;
  char buf[4096];
  if (::getpwuid_r(uid, &pw, buf, sizeof(buf), &found) == 0 && found) return found->pw_name;
  if (const char* u = std::getenv("USER"); u && *u) return u;
  return "uid" + std::to_string(uid);
}

std::string ProcessHolder() {
  return ProcessUserName() + "@" + ProcessHostName() + " pid " + std::to_string(::getpid());
}

LockInfo ThisProcessLock(const std::string& operation) {
  LockInfo info;
  info.id = RandomHex(16);
  info.pid = static_cast<int>(::getpid());
  info.hostname = ProcessHostName();
  info.holder = ProcessHolder();
  info.operation = operation;
  info.created = NowRfc3339();
  return info;
}

namespace {

// The value of the `n` digits at `text[at]`, or -1 when they are not all digits.
int Digits(const std::string& text, size_t at, size_t n) {
  if (at + n > text.size()) return -1;
  int v = 0;
  for (size_t i = at; i < at + n; ++i) {
    if (text[i] < '0' || text[i] > '9') return -1;
    v = v * 10 + (text[i] - '0');
  }
  return v;
}

// Days from 1970-01-01 to y-m-d in the proleptic Gregorian calendar (Howard
// Hinnant's days_from_civil).
int64_t DaysFromCivil(int64_t y, unsigned m, unsigned d) {
  y -= m <= 2;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const unsigned yoe = static_cast<unsigned>(y - era * 400);
  const unsigned doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + static_cast<int64_t>(doe) - 719468;
}

bool IsLeap(int y) { return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0; }

}  // namespace

std::optional<int64_t> ParseRfc3339Micros(const std::string& t) {
  // YYYY-MM-DDTHH:MM:SS[.frac](Z|+HH:MM|-HH:MM)
  if (t.size() < 20 || t[4] != '-' || t[7] != '-' || (t[10] != 'T' && t[10] != 't') ||
      t[13] != ':' || t[16] != ':')
    return std::nullopt;
  const int year = Digits(t, 0, 4), month = Digits(t, 5, 2), day = Digits(t, 8, 2);
  const int hour = Digits(t, 11, 2), minute = Digits(t, 14, 2), second = Digits(t, 17, 2);
  if (year < 0 || month < 1 || month > 12 || day < 1 || hour < 0 || hour > 23 || minute < 0 ||
      minute > 59 || second < 0 || second > 60)
    return std::nullopt;
  static const int kDays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  if (day > kDays[month - 1] + (month == 2 && IsLeap(year) ? 1 : 0)) return std::nullopt;
  size_t at = 19;
  int64_t micros = 0;
  if (at < t.size() && t[at] == '.') {
    ++at;
    const size_t first = at;
    int64_t scale = 100000;
    for (; at < t.size() && t[at] >= '0' && t[at] <= '9'; ++at, scale /= 10)
      micros += scale > 0 ? (t[at] - '0') * scale : 0;
    if (at == first) return std::nullopt;
  }
  int64_t offset_s = 0;
  if (at + 1 == t.size() && (t[at] == 'Z' || t[at] == 'z')) {
    // UTC
  } else if (at + 6 == t.size() && (t[at] == '+' || t[at] == '-') && t[at + 3] == ':') {
    const int oh = Digits(t, at + 1, 2), om = Digits(t, at + 4, 2);
    if (oh < 0 || oh > 23 || om < 0 || om > 59) return std::nullopt;
    offset_s = (t[at] == '+' ? 1 : -1) * (oh * 3600 + om * 60);
  } else {
    return std::nullopt;
  }
  const int64_t seconds =
      DaysFromCivil(year, static_cast<unsigned>(month), static_cast<unsigned>(day)) * 86400 +
      hour * 3600 + minute * 60 + second - offset_s;
  return seconds * 1000000 + micros;
}

Status CheckBenchRun(const nlohmann::json& run) {
  if (!run.is_object()) return Status::Error("a bench run is a JSON object");
  for (const char* key : {"id", "deployment", "node", "profile", "outcome"})
    if (!run.contains(key) || !run[key].is_string() ||
        (run[key].get<std::string>().empty() && std::string(key) != "node"))
      return Status::Error(std::string("a bench run needs \"") + key + "\" (a string)");
  if (!run.contains("time") || !run["time"].is_string() ||
      !ParseRfc3339Micros(run["time"].get<std::string>()))
    return Status::Error("a bench run needs \"time\" (RFC 3339)");
  if (!run.contains("record") || !run["record"].is_object())
    return Status::Error("a bench run needs \"record\" (an object)");
  return Status::OK();
}

Status CheckEvent(const nlohmann::json& event) {
  if (!event.is_object()) {
    return Status::Error(std::string("an event must be a JSON object, got ") + event.type_name());
  }
  const auto time = event.find("time");
  if (time == event.end() || !time->is_string() || !ParseRfc3339Micros(time->get<std::string>())) {
    return Status::Error(
        "an event needs \"time\", an RFC 3339 time such as 2026-11-29T17:35:24Z, got " +
        (time == event.end()
             ? std::string("none")
             : time->dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)));
  }
  const auto name = event.find("event");
  if (name == event.end() || !name->is_string() || name->get<std::string>().empty()) {
    return Status::Error(
        "an event needs \"event\", its kind (heal, quarantine, heal_wait, sync), got " +
        (name == event.end()
             ? std::string("none")
             : name->dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)));
  }
  return Status::OK();
}

}  // namespace fleet
