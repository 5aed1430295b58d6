// Progress of a long transfer as lines for StepContext::progress: bytes
// done, rate and ETA, at most one line every `interval` seconds.
#ifndef FLEET_PROVIDERS_MODEL_PROGRESS_METER_H_
#define FLEET_PROVIDERS_MODEL_PROGRESS_METER_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>

#include "src/clock.h"

namespace fleet {

class ProgressMeter {
 public:
  // `total` 0: unknown (no percentage, no ETA). `emit` may be empty.
  // Rates and intervals are read from `clock` (the step's), which must
  // outlive the meter.
  ProgressMeter(std::string label, uint64_t total, std::function<void(const std::string&)> emit,
                Clock* clock, double interval_s = 2.0);

  // Thread-safe.
  void Add(uint64_t bytes);
  void Set(uint64_t done);  // absolute (for polled progress)
  // Emits the final line ("4.0 GB in 36 s, 111 MB/s").
  void Finish();

  uint64_t done() const;

  // "1.2 GB / 4.0 GB (30%), 110 MB/s, ETA 25 s" (exposed for tests).
  static std::string Format(const std::string& label, uint64_t done, uint64_t total,
                            double seconds);

 private:
  void MaybeEmitLocked(bool force);
  const std::string label_;
  const uint64_t total_;
  const std::function<void(const std::string&)> emit_;
  Clock* const clock_;
  const double interval_s_;
  mutable std::mutex mu_;
  uint64_t done_ = 0;
  const std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_;
};

}  // namespace fleet

#endif  // FLEET_PROVIDERS_MODEL_PROGRESS_METER_H_
