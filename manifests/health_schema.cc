#include "manifests/health_schema.h"

#include "manifests/duration.h"
#include "manifests/smoke_schema.h"

namespace fleet {

using yaml_schema::MapReader;
using yaml_schema::Reporter;

void ReadHealthCheck(Reporter* reporter, const MapReader& health, HealthCheck* out) {
  health.CheckKeys({"path", "timeout", "grace", "busy_grace", "prefill_tps", "request_timeout"});
  if (auto path = health.String("path")) {
    if (path->value.empty() || path->value[0] != '/') {
      reporter->Error(path->loc, "'path' in " + health.what() +
                                     " must be an HTTP path starting with '/', got '" +
                                     path->value + "'");
    } else {
      out->path = path->value;
    }
  }
  if (auto timeout = health.String("timeout")) {
    if (auto seconds = ParseDurationSeconds(timeout->value)) {
      out->timeout_s = *seconds;
    } else {
      reporter->Error(timeout->loc, "'timeout' in " + health.what() +
                                        " must be a duration such as 30m, 90s or 2h (a plain "
                                        "number is seconds), got '" +
                                        timeout->value + "'");
    }
  }
  if (auto grace = health.Int("grace", 1, 1000)) out->grace_rounds = grace->value;
  if (auto busy = health.String("busy_grace")) {
    if (auto seconds = ParseDurationSeconds(busy->value)) {
      out->busy_grace_s = *seconds;
    } else {
      reporter->Error(busy->loc, "'busy_grace' in " + health.what() +
                                     " must be a duration such as 10m or 90s (how long a health "
                                     "probe may time out while the container runs), got '" +
                                     busy->value + "'");
    }
  }
  if (auto rt = health.String("request_timeout")) {
    const std::optional<int> seconds = ParseDurationSeconds(rt->value);
    if (seconds && *seconds >= 1 && *seconds <= 3600)
      out->request_timeout_s = *seconds;
    else
      reporter->Error(rt->loc, "'request_timeout' in " + health.what() +
                                   " must be a duration such as 5s, 2m or 1h from 1s to 3600s, "
                                   "got '" +
                                   rt->value + "'");
  }
  if (auto tps = health.String("prefill_tps")) {
    if (!ParseRate(tps->value, &out->prefill_tps))
      reporter->Error(tps->loc, "'prefill_tps' in " + health.what() +
                                    " must be a number of prompt tokens/s above 0 (at most "
                                    "1000000) such as 1000 or 150, got '" +
                                    tps->value + "'");
  }
}

}  // namespace fleet
