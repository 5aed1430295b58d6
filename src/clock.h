// The one seam through which fleet reads time and waits, in the manner of
// LevelDB's Env: production code asks a Clock, never std::chrono's clocks
// or std::this_thread directly, so that a test can hand in a FakeClock
// (src/fake_clock.h) whose time moves only when the test says and whose
// SleepFor returns at once. A health wait of 15 min or a lock retry of
// 400 ms then costs a test no wall time, and its outcome no longer depends
// on how busy the machine is.
#ifndef FLEET_SRC_CLOCK_H_
#define FLEET_SRC_CLOCK_H_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>

namespace fleet {

class Clock {
 public:
  virtual ~Clock() = default;

  // Monotonic time, for deadlines and elapsed durations.
  virtual std::chrono::steady_clock::time_point SteadyNow() = 0;

  // Wall time, for what is written down (state records, events, reports).
  virtual std::chrono::system_clock::time_point WallNow() = 0;

  // Blocks the calling thread for `d` (a FakeClock advances its time
  // instead). REQUIRES: d >= 0; a negative d returns at once.
  virtual void SleepFor(std::chrono::nanoseconds d) = 0;

  // Waits on `cv` for `ready()`, as std::condition_variable::wait_for does,
  // for at most `d` on this clock: a queue's consumer waking for data or a
  // worker for its stop. Returns ready(), checked under `lock`. The real
  // clock waits on `cv` (a notify ends the wait at once); a FakeClock moves
  // its time by `d` instead. REQUIRES: `lock` holds the mutex `cv` is used
  // with.
  virtual bool WaitOn(std::condition_variable& cv, std::unique_lock<std::mutex>& lock,
                      std::chrono::nanoseconds d, const std::function<bool()>& ready);

  // Seconds since the Unix epoch of WallNow().
  int64_t UnixSeconds();
};

// The machine's clocks and a real sleep. Thread-safe; lives for the whole
// process. The default wherever no clock was handed down: main() and the
// contexts built by hand in tests get the real one without threading a
// pointer through every constructor.
Clock* RealClock();

// `t` as RFC 3339 in UTC to the second, e.g. "2026-12-06T10:03:21Z".
std::string Rfc3339Utc(std::chrono::system_clock::time_point t);

}  // namespace fleet

#endif  // FLEET_SRC_CLOCK_H_
