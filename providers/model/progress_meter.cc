#include "providers/model/progress_meter.h"

#include <cstdio>

#include "providers/shared/hub_cache.h"

namespace fleet {

namespace {

std::string Duration(double s) {
  char buf[32];
  if (s < 90)
    snprintf(buf, sizeof buf, "%.0f s", s);
  else if (s < 5400)
    snprintf(buf, sizeof buf, "%.0f min", s / 60);
  else
    snprintf(buf, sizeof buf, "%.1f h", s / 3600);
  return buf;
}

}  // namespace

ProgressMeter::ProgressMeter(std::string label, uint64_t total,
                             std::function<void(const std::string&)> emit, Clock* clock,
                             double interval_s)
    : label_(std::move(label)),
      total_(total),
      emit_(std::move(emit)),
      clock_(clock),
      interval_s_(interval_s),
      start_(clock->SteadyNow()),
      last_(start_) {}

void ProgressMeter::Add(uint64_t bytes) {
  std::lock_guard<std::mutex> l(mu_);
  done_ += bytes;
  MaybeEmitLocked(false);
}

void ProgressMeter::Set(uint64_t done) {
  std::lock_guard<std::mutex> l(mu_);
  done_ = done;
  MaybeEmitLocked(false);
}

uint64_t ProgressMeter::done() const {
  std::lock_guard<std::mutex> l(mu_);
  return done_;
}

void ProgressMeter::Finish() {
  std::lock_guard<std::mutex> l(mu_);
  if (!emit_) return;
  double s = std::chrono::duration<double>(clock_->SteadyNow() - start_).count();
  char rate[48] = "";
  if (s > 0.05)
    snprintf(rate, sizeof rate, ", %s/s", HumanBytes(static_cast<uint64_t>(done_ / s)).c_str());
  emit_(label_ + ": " + HumanBytes(done_) + " in " + Duration(s) + rate);
}

void ProgressMeter::MaybeEmitLocked(bool force) {
  if (!emit_) return;
  auto now = clock_->SteadyNow();
  if (!force && std::chrono::duration<double>(now - last_).count() < interval_s_) return;
  last_ = now;
  emit_(Format(label_, done_, total_, std::chrono::duration<double>(now - start_).count()));
}

std::string ProgressMeter::Format(const std::string& label, uint64_t done, uint64_t total,
                                  double seconds) {
  std::string s = label + ": " + HumanBytes(done);
  if (total > 0) {
    char pct[16];
    snprintf(pct, sizeof pct, " (%.0f%%)", 100.0 * static_cast<double>(done) / total);
    s += " / " + HumanBytes(total) + pct;
  }
  if (seconds > 0.05 && done > 0) {
    double rate = done / seconds;
    s += ", " + HumanBytes(static_cast<uint64_t>(rate)) + "/s";
    if (total > done) s += ", ETA " + Duration((total - done) / rate);
  }
  return s;
}

}  // namespace fleet
