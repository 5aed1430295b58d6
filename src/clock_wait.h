// Waiting for a condition with a deadline, through the seam (src/clock.h):
// a condition variable's wait_until reads the machine's steady clock
// whatever Clock was handed down, so a deadline measured on a FakeClock
// would be meaningless to it. WaitOnClock looks at the condition every
// `poll` and sleeps on the Clock in between: on the real clock it ends at
// most `poll` after the condition holds; on a FakeClock the wait runs its
// whole length at once (the test's time jumps to the deadline when the
// condition does not hold).
#ifndef FLEET_SRC_CLOCK_WAIT_H_
#define FLEET_SRC_CLOCK_WAIT_H_

#include <chrono>
#include <functional>

#include "src/clock.h"

namespace fleet {

inline constexpr std::chrono::milliseconds kClockWaitPoll{100};

// Returns true as soon as `done()` does, false once `clock` reaches
// `deadline` first. `done` is called on the calling thread, without any
// lock of the caller's held (take it inside). REQUIRES: poll > 0.
bool WaitOnClock(Clock* clock, std::chrono::steady_clock::time_point deadline,
                 const std::function<bool()>& done, std::chrono::nanoseconds poll = kClockWaitPoll);

}  // namespace fleet

#endif  // FLEET_SRC_CLOCK_WAIT_H_
