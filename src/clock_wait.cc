#include "src/clock_wait.h"

#include <algorithm>

namespace fleet {

bool WaitOnClock(Clock* clock, std::chrono::steady_clock::time_point deadline,
                 const std::function<bool()>& done, std::chrono::nanoseconds poll) {
  for (auto now = clock->SteadyNow(); !done(); now = clock->SteadyNow()) {
    if (now >= deadline) return false;
    clock->SleepFor(std::min<std::chrono::nanoseconds>(poll, deadline - now));
  }
  return true;
}

}  // namespace fleet
