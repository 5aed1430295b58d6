#include "src/clock.h"

#include <ctime>
#include <thread>

namespace fleet {
namespace {

class SystemClock : public Clock {
 public:
  std::chrono::steady_clock::time_point SteadyNow() override {
    return std::chrono::steady_clock::now();
  }
  std::chrono::system_clock::time_point WallNow() override {
    return std::chrono::system_clock::now();
  }
  void SleepFor(std::chrono::nanoseconds d) override {
    if (d > std::chrono::nanoseconds::zero()) std::this_thread::sleep_for(d);
  }
};

}  // namespace

bool Clock::WaitOn(std::condition_variable& cv, std::unique_lock<std::mutex>& lock,
                   std::chrono::nanoseconds d, const std::function<bool()>& ready) {
  return cv.wait_for(lock, d, ready);
}

int64_t Clock::UnixSeconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(WallNow().time_since_epoch()).count();
}

Clock* RealClock() {
  static SystemClock* clock = new SystemClock;  // never destroyed: used by detached threads
  return clock;
}

std::string Rfc3339Utc(std::chrono::system_clock::time_point t) {
  const std::time_t secs = std::chrono::system_clock::to_time_t(t);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace fleet
