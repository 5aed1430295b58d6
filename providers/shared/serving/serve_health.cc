#include "providers/shared/serving/serve_health.h"

#include <chrono>
#include <optional>

#include "manifests/duration.h"
#include "providers/shared/serving/deployment_probe.h"
#include "providers/shared/serving/smoke_check.h"
#include "src/shell_quote.h"

namespace fleet {
namespace {

// State and health of the container, one command: its inspect through the
// engine's API where it answers (a CLI start is 50-95 ms of the node's CPU,
// every 0.3-2 s of the wait), and the health URL while it runs.
Result<ContainerProbe> PollContainer(const StepContext& ctx, const ContainerSpec& spec,
                                     const std::string& url) {
  Result<CommandResult> r = ctx.transport->Run(ContainerPollScript(spec, url));
  if (!r.ok()) return r.status();
  return ParseContainerProbe(r->out);
}

// Whether a node has stopped answering during a health wait: polls that
// cannot connect to it (refused, timed out), kDarkPolls in a row and over
// at least `dark_s` (DarkNodeSeconds). A busy sshd or a LAN blip fails a
// few connects; a node without power or network fails them all, and its
// serve is gone.
class DarkNode {
 public:
  static constexpr int kDarkPolls = 3;

  DarkNode(Clock* clock, int dark_s) : clock_(clock), dark_time_(dark_s) {}

  // Notes one poll's outcome; true when the wait should give up.
  bool Note(const Status& poll) {
    if (!poll.unreachable()) {
      polls_ = 0;
      return false;
    }
    if (polls_++ == 0) since_ = clock_->SteadyNow();
    return polls_ >= kDarkPolls && clock_->SteadyNow() - since_ >= dark_time_;
  }
  std::string Describe() const {
    return std::to_string(polls_) + " connections in a row failed over " +
           HumanDuration(
               std::chrono::duration_cast<std::chrono::seconds>(clock_->SteadyNow() - since_)
                   .count());
  }

 private:
  Clock* clock_;
  std::chrono::seconds dark_time_;
  int polls_ = 0;
  std::chrono::steady_clock::time_point since_;
};

}  // namespace

Result<int> DarkNodeSeconds(const Settings& settings) {
  const std::string& v = settings.health_dark_after;
  if (v.empty()) return kDefaultDarkNodeSeconds;
  if (std::optional<int> s = ParseDurationSeconds(v)) return *s;
  return Result<int>::Error("FLEET_HEALTH_DARK_AFTER=" + v +
                            " is not a duration of at least 1 s (e.g. 30s, 2m)");
}

// Waits until the health URL answers 2xx. Fails at once when the container
// stops, when the node has gone dark (DarkNode), and after `timeout_s`.
Status WaitHealthy(const StepContext& ctx, const ContainerSpec& spec) {
  const std::string url = spec.HealthUrl();
  if (url.empty()) {
    // A worker: it serves no API; it is healthy while it runs (the head's
    // health check, which needs every worker, says the rest).
    ctx.clock->SleepFor(std::chrono::seconds(2));
    Result<ContainerProbe> p = PollContainer(ctx, spec, "");
    if (!p.ok()) return p.status();
    if (p->state == "running") return Status::OK();
    return Status::Error("container " + spec.container + " (rank " + std::to_string(spec.rank) +
                         ") is " + (p->state.empty() ? "gone" : p->state) + " (exit code " +
                         std::to_string(p->exit_code) + ") 2 s after its start" +
                         LogTail(ctx, spec));
  }
  const Result<int> dark_s = DarkNodeSeconds(*ctx.settings);
  if (!dark_s.ok()) return dark_s.status();
  Clock* clock = ctx.clock;
  const auto start = clock->SteadyNow();
  auto last_report = start;
  DarkNode dark(clock, *dark_s);
  if (ctx.progress)
    ctx.progress("waiting for " + url + " (health.timeout " + HumanDuration(spec.health_timeout_s) +
                 ")");
  for (;;) {
    Result<ContainerProbe> p = PollContainer(ctx, spec, url);
    const long waited =
        std::chrono::duration_cast<std::chrono::seconds>(clock->SteadyNow() - start).count();
    if (dark.Note(p.status()))
      return p.status().Reworded("the node stopped answering while " + url + " was awaited (" +
                                 dark.Describe() + ", " + HumanDuration(waited) +
                                 " into health.timeout): " + p.status().message());
    if (!p.ok()) {
      // One lost SSH round trip must not fail a serve that takes 15 min to
      // boot: ask again until the timeout (or until DarkNode gives up).
      if (waited >= spec.health_timeout_s) return p.status();
      if (ctx.progress) ctx.progress("health poll failed, retrying: " + p.status().message());
      clock->SleepFor(std::chrono::seconds(2));
      continue;
    }
    if (p->state != "running")
      return Status::Error(
          "container " + spec.container +
          (p->state.empty()
               ? " disappeared"
               : " is " + p->state + " (exit code " + std::to_string(p->exit_code) + ")") +
          " after " + HumanDuration(waited) + ", before " + url + " answered" + LogTail(ctx, spec));
    if (p->health >= 200 && p->health < 300) return Status::OK();
    if (p->health == -1 && p->state == "running")
      return Status::Error("cannot check " + url + ": neither curl nor wget is on the node's PATH");
    if (waited >= spec.health_timeout_s)
      return Status::Error(url + " did not answer 2xx within " +
                           HumanDuration(spec.health_timeout_s) +
                           " (health.timeout; last answer: " +
                           (p->health == 0 ? std::string("none") : std::to_string(p->health)) +
                           ")" + LogTail(ctx, spec));
    if (ctx.progress && clock->SteadyNow() - last_report >= std::chrono::seconds(10)) {
      last_report = clock->SteadyNow();
      ctx.progress("waiting for " + url + " (" + HumanDuration(waited) + " of " +
                   HumanDuration(spec.health_timeout_s) + ", last answer " +
                   (p->health == 0 ? std::string("none") : std::to_string(p->health)) + ")");
    }
    clock->SleepFor(std::chrono::milliseconds(waited < 10 ? 300 : 2000));
  }
}

std::string HumanDuration(long s) {
  if (s < 0) return "?";
  if (s < 120) return std::to_string(s) + " s";
  if (s < 7200) return std::to_string(s / 60) + " min";
  return std::to_string(s / 3600) + " h";
}

// The last lines the container printed, for an error message.
// Engines print their arguments (sglang's server_args, vLLM's non-default
// args): the secrets of `spec` are masked.
std::string LogTail(const StepContext& ctx, const ContainerSpec& spec) {
  Result<CommandResult> r = ctx.transport->Run(
      ShellCommand({spec.cli, "logs", "--tail", "20", spec.container}) + " 2>&1");
  if (!r.ok() || r->out.empty()) return "";
  std::string out = Redact(r->out, SecretValues(spec));
  while (!out.empty() && out.back() == '\n') out.pop_back();
  return "\n  last lines of its log:\n    " + [&] {
    std::string s;
    for (char c : out) s += c == '\n' ? std::string("\n    ") : std::string(1, c);
    return s;
  }();
}

// Healthy, then the deployment's smoke checks: a serve that answers 200 but
// garbles fails its step like an unhealthy one.
Status WaitServing(const StepContext& ctx, const ContainerSpec& spec) {
  Status healthy = WaitHealthy(ctx, spec);
  return healthy.ok() ? SmokeAfterHealthy(ctx, spec) : healthy;
}

}  // namespace fleet
