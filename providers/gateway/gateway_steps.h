// A gateway's container on its node: what the probe reads of it, and the
// steps apply runs there. Every command is POSIX sh run over the node's
// transport; every interpolated value goes through ShellQuote.
#ifndef FLEET_PROVIDERS_GATEWAY_GATEWAY_STEPS_H_
#define FLEET_PROVIDERS_GATEWAY_GATEWAY_STEPS_H_

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "providers/gateway/gateway_config.h"
#include "src/provider.h"
#include "src/status.h"

namespace fleet {

// What the probe found of a gateway on its node.
struct GatewayProbe {
  bool cli_found = true;
  bool exists = false;
  std::string state;                         // "running", "exited", ...
  std::string spec;                          // its fleet.spec label
  std::string written;                       // the config hash in the file ("" none)
  std::vector<GatewayRoute> written_routes;  // the routes in the file
  std::string loaded;  // the config hash the running HAProxy answers with ("" none)
};

// The read-only probe fragment, and its parse.
std::string GatewayProbeScript(const GatewayWant& want);
GatewayProbe ParseGatewayProbe(const std::string& output);

// What WaitGatewayLoaded runs on the node: exit 0 once the gateway answers
// with want.config; exit 3, printing why, when it does not within ~30 s or
// its container stops (gateway_wait_loaded.sh).
std::string GatewayWaitLoadedScript(const GatewayWant& want);
// What WaitGatewayDrained runs on the node: exit 0 once the container's
// first process has at most one child left; exit 3, printing how many,
// after (drain_s + 5) s (gateway_wait_drained.sh).
std::string GatewayWaitDrainedScript(const GatewayWant& want);

// Writes the config of `want` on the node, atomically (a rename: the
// container, which binds the directory, sees the old file or the new one).
Status WriteGatewayConfig(const StepContext& ctx, const GatewayWant& want);
// What WriteGatewayConfig runs on the node (gateway_config_write.sh).
std::string GatewayConfigWriteScript(const GatewayWant& want);

// Starts the gateway's container from `image_id` (already on the node).
// REQUIRES: no container of that name; the config written.
Status RunGateway(const StepContext& ctx, const GatewayWant& want, const std::string& image_id);

// `start` for a stopped container of the gateway.
Status StartGateway(const StepContext& ctx, const GatewayWant& want);

// The hitless reload: SIGUSR2 to HAProxy's master, which starts a worker on
// the new config and lets the old one finish the requests it carries.
Status ReloadGateway(const StepContext& ctx, const GatewayWant& want);

// Waits until the gateway answers with want.config loaded (30 s); an error
// with the container's last log lines otherwise.
Status WaitGatewayLoaded(const StepContext& ctx, const GatewayWant& want);

// Waits until the workers of earlier configs have exited (every request
// they carried finished), at most want.drain_s and a little more.
Status WaitGatewayDrained(const StepContext& ctx, const GatewayWant& want);

// Removes the container and its config directory.
Status RemoveGateway(const StepContext& ctx, const std::string& cli, const std::string& gateway);

// The container's ID, for the state record.
Result<std::string> GatewayContainerId(const StepContext& ctx, const GatewayWant& want);

void to_json(nlohmann::json& j, const GatewayProbe& v);
void from_json(const nlohmann::json& j, GatewayProbe& v);

}  // namespace fleet

#endif  // FLEET_PROVIDERS_GATEWAY_GATEWAY_STEPS_H_
