#include "providers/shared/serving_containers.h"

#include <sstream>

#include "providers/shared/container_labels.h"
#include "providers/shared/engine_api.h"
#include "src/shell_quote.h"

namespace fleet {

namespace {

constexpr char kServingApiLine[] = "serving_api=";

}  // namespace

std::string ServingContainersCliCommand(const std::string& cli) {
  return kListingCliEnv +
         ShellCommand({cli, "ps", "--filter", std::string("label=") + kDeploymentLabel, "--format",
                       "serving={{.Names}}"});
}

std::string ServingContainersCommand(const std::string& cli) {
  // The API's answer goes to the controller, which reads its names.
  return "{\n" + EngineSocketScript(cli) +
         ProbeApiGetScript("sv_out", "sv_api", ServingContainersApiPath(), {"200"}) +
         "if [ -n \"$sv_api\" ]; then " +
         PrefixedLinesScript("\"${sv_out%\"\n@api=200\"}\"", kServingApiLine) + "else " +
         ServingContainersCliCommand(cli) + "; fi\n}";
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
