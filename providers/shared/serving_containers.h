// The running fleet serves on a node (containers labelled fleet.deployment),
// the one listing the deployment probe and the display_ram provider (which
// stops them around a module reload) use. Shared here, so that neither
// includes the other's header.
#ifndef FLEET_PROVIDERS_SHARED_SERVING_CONTAINERS_H_
#define FLEET_PROVIDERS_SHARED_SERVING_CONTAINERS_H_

#include <string>
#include <vector>

namespace fleet {

// `<cli> ps` of the running containers labelled fleet.deployment, one
// "serving=<name>" line each.
std::string ServingContainersCliCommand(const std::string& cli);

// The same list, one sh command (a group: a redirection after it covers it
// all): the engine API's answer on "serving_api=" lines where it answers
// (EngineSocketScript's socket, the installed fleet-probe: no CLI start),
// else ServingContainersCliCommand, whose exit status it keeps.
// ParseServingContainers reads both.
std::string ServingContainersCommand(const std::string& cli);
std::vector<std::string> ParseServingContainers(const std::string& output);

}  // namespace fleet

#endif  // FLEET_PROVIDERS_SHARED_SERVING_CONTAINERS_H_
