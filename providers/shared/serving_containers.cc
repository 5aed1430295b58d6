#include "providers/shared/serving_containers.h"

#include <sstream>

#include "providers/shared/container_labels.h"
#include "providers/shared/engine_api.h"
#include "providers/shared/node_script.h"
#include "providers/shared/serving_containers_sh.h"
#include "src/shell_quote.h"

namespace fleet {

namespace {

// The line serving_containers.sh prints each line of the API's answer on.
constexpr char kServingApiLine[] = "serving_api=";

}  // namespace

std::string ServingContainersCliCommand(const std::string& cli) {
  return kListingCliEnv +
         ShellCommand({cli, "ps", "--filter", std::string("label=") + kDeploymentLabel, "--format",
                       "serving={{.Names}}"});
}

std::string ServingContainersCommand(const std::string& cli) {
  // serving_containers.sh (beside this file; its header says what it
  // prints) after the API's read, with its values. The API's answer goes to
  // the controller, which reads its names.
  return "{\n" + EngineSocketScript(cli) +
         ProbeApiGetScript("sv_out", "sv_api", ServingContainersApiPath(), {"200"}) +
         ScriptWithValues(
             {{"svc_cli", ShellQuote(cli)}, {"svc_label", ShellQuote(kDeploymentLabel)}},
             kServingContainersScript, kServingContainersScriptSize) +
         "}";
}

std::vector<std::string> ParseServingContainers(const std::string& output) {
  std::vector<std::string> names;
  std::istringstream lines(output);
  std::string line, api;
  while (std::getline(lines, line)) {
    if (line.rfind("serving=", 0) == 0 && line.size() > 8) names.push_back(line.substr(8));
    if (line.rfind(kServingApiLine, 0) == 0) api += line.substr(sizeof kServingApiLine - 1);
  }
  if (!api.empty()) ContainerNamesFromJson(api, &names);
  return names;
}

}  // namespace fleet
