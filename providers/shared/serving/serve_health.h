// Health and smoke of a serve being started: the wait that ends a
// deployment step only when its health URL answers 2xx (the log's "started"
// while the API never came) and its smoke checks pass (a serve that answers
// 200 but garbles fails like an unhealthy one).
#ifndef FLEET_PROVIDERS_SHARED_SERVING_SERVE_HEALTH_H_
#define FLEET_PROVIDERS_SHARED_SERVING_SERVE_HEALTH_H_

#include <string>

#include "providers/shared/serving/deployment_spec.h"
#include "src/provider.h"
#include "src/settings.h"
#include "src/status.h"

namespace fleet {

// "45 s", "12 min", "3 h"; "?" for a negative count.
std::string HumanDuration(long seconds);

// The last lines the container printed, as the tail of an error message
// ("" when there are none). Secrets of `spec` are masked: engines print
// their arguments (sglang's server_args, vLLM's non-default args).
std::string LogTail(const StepContext& ctx, const ContainerSpec& spec);

// How long a node may fail every connect during a health wait before the
// wait gives up on it (with at least 3 connects failed in a row):
// FLEET_HEALTH_DARK_AFTER (settings.health_dark_after), a duration, else
// 30 s. An error when it is set to something else than a duration of >= 1 s.
inline constexpr int kDefaultDarkNodeSeconds = 30;
Result<int> DarkNodeSeconds(const Settings& settings);

// Waits until the health URL answers 2xx (a worker, which serves no API:
// until it is seen running 2 s after its start). Fails at once when the
// container stops, when the node has gone dark (3 failed connects in a row
// over DarkNodeSeconds()), and after spec.health_timeout_s; a lost round
// trip is retried.
Status WaitHealthy(const StepContext& ctx, const ContainerSpec& spec);

// WaitHealthy, then the deployment's smoke checks (SmokeAfterHealthy).
Status WaitServing(const StepContext& ctx, const ContainerSpec& spec);

}  // namespace fleet

#endif  // FLEET_PROVIDERS_SHARED_SERVING_SERVE_HEALTH_H_
