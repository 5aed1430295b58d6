// A Clock for tests: time stands still until Advance() or SleepFor() moves
// it, so a wait of minutes runs in microseconds and its outcome does not
// depend on the machine's load. Thread-safe.
#ifndef FLEET_SRC_FAKE_CLOCK_H_
#define FLEET_SRC_FAKE_CLOCK_H_

#include <chrono>
#include <functional>
#include <mutex>
#include <utility>

#include "src/clock.h"

namespace fleet {

class FakeClock : public Clock {
 public:
  // Starts at `wall` (default 2026-01-01T00:00:00Z) and at an arbitrary
  // steady time.
  explicit FakeClock(std::chrono::system_clock::time_point wall =
                         std::chrono::system_clock::time_point(std::chrono::seconds(1767225600)))
      : wall_(wall) {}

  std::chrono::steady_clock::time_point SteadyNow() override {
    std::lock_guard<std::mutex> l(mu_);
    return steady_;
  }
  std::chrono::system_clock::time_point WallNow() override {
    std::lock_guard<std::mutex> l(mu_);
    return wall_;
  }
  // Advances the time by `d` and returns at once; then runs the hook set
  // by OnSleep (e.g. a test's "the holder lets go after 700 ms").
  void SleepFor(std::chrono::nanoseconds d) override {
    std::function<void()> hook;
    {
      std::lock_guard<std::mutex> l(mu_);
      if (d > std::chrono::nanoseconds::zero()) {
        steady_ += d;
        wall_ += std::chrono::duration_cast<std::chrono::system_clock::duration>(d);
      }
      ++sleeps_;
      hook = on_sleep_;
    }
    if (hook) hook();
  }

  // Waits for a notify for at most a millisecond of real time (so that a
  // worker polling on a fake clock does not spin a core), and when `ready()`
  // still does not hold moves the time by `d` (as SleepFor, hook included,
  // run with `lock` let go).
  bool WaitOn(std::condition_variable& cv, std::unique_lock<std::mutex>& lock,
              std::chrono::nanoseconds d, const std::function<bool()>& ready) override {
    if (cv.wait_for(lock, std::chrono::milliseconds(1), ready)) return true;
    lock.unlock();
    SleepFor(d);
    lock.lock();
    return ready();
  }

  // Moves both clocks forward by `d`. REQUIRES: d >= 0.
  void Advance(std::chrono::nanoseconds d) {
    std::lock_guard<std::mutex> l(mu_);
    steady_ += d;
    wall_ += std::chrono::duration_cast<std::chrono::system_clock::duration>(d);
  }

  // Total time slept and advanced since construction.
  std::chrono::nanoseconds Elapsed() {
    std::lock_guard<std::mutex> l(mu_);
    return steady_ - std::chrono::steady_clock::time_point();
  }
  int sleeps() {
    std::lock_guard<std::mutex> l(mu_);
    return sleeps_;
  }

  // Runs `hook` after every SleepFor (outside the clock's lock).
  void OnSleep(std::function<void()> hook) {
    std::lock_guard<std::mutex> l(mu_);
    on_sleep_ = std::move(hook);
  }

 private:
  std::mutex mu_;
  std::chrono::steady_clock::time_point steady_{};
  std::chrono::system_clock::time_point wall_;
  int sleeps_ = 0;
  std::function<void()> on_sleep_;
};

}  // namespace fleet

#endif  // FLEET_SRC_FAKE_CLOCK_H_
