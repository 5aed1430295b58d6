// The `health:` map of a deployment in fleet.yaml:
//
//   health: {path: /v1/models, timeout: 30m, grace: 3, busy_grace: 10m, prefill_tps: 1000}
//
// path and timeout: apply's health-gated start; grace: watch rounds the
// health URL may fail before the serve is unhealthy; busy_grace: how long a
// probe that times out while the container runs reads as busy (a long
// prefill holds the engine's one event loop), not unhealthy; prefill_tps:
// the serve's slowest prefill, prompt tokens/s, from which a smoke check
// allows for the silence before its first token (a check's own prefill_tps
// wins). Errors name file:line:column.
#ifndef FLEET_MANIFESTS_HEALTH_SCHEMA_H_
#define FLEET_MANIFESTS_HEALTH_SCHEMA_H_

#include <string>

#include "manifests/manifest.h"
#include "manifests/yaml_schema.h"

namespace fleet {

// Reads `health` (the deployment's map under that key; absent: the
// defaults). Problems go to `reporter`; a bad value keeps its default.
void ReadHealthCheck(yaml_schema::Reporter* reporter, const yaml_schema::MapReader& health,
                     HealthCheck* out);

}  // namespace fleet

#endif  // FLEET_MANIFESTS_HEALTH_SCHEMA_H_
