#include "providers/shared/engine_api.h"

#include <nlohmann/json.hpp>

#include "providers/shared/container_labels.h"
#include "providers/shared/engine_api_get_sh.h"
#include "providers/shared/engine_socket_sh.h"
#include "src/probe/probe_install.h"
#include "src/shell_quote.h"

namespace fleet {

std::string ServingContainersApiPath() {
  return std::string("/containers/json?filters=%7B%22label%22%3A%5B%22") + kDeploymentLabel +
         "%22%5D%7D";
}

std::string EngineSocketScript(const std::string& cli) {
  return "engine_cli=" + ShellQuote(cli) + "\n" +
         std::string(kEngineSocketScript, kEngineSocketScriptSize);
}

std::string PrefixedLinesScript(const std::string& value, const std::string& prefix) {
  return "printf '%s\\n' " + value + " | while IFS= read -r l; do printf '" + prefix +
         "%s\\n' \"$l\"; done\n";
}

std::string ProbeApiGetScript(const std::string& out, const std::string& answered,
                              const std::string& path, std::initializer_list<const char*> codes) {
  std::string wanted;
  for (const char* c : codes) wanted += std::string(wanted.empty() ? "" : " ") + c;
  // The embedded script's answer under the caller's names: one line.
  return "eag_probe=" + ShellQuote(kProbeInstallPath) + " eag_path=" + ShellQuote(path) +
         " eag_codes=" + ShellQuote(wanted) + "\n" +
         std::string(kEngineApiGetScript, kEngineApiGetScriptSize) + out + "=$eag_out " + out +
         "_rc=$eag_rc " + answered + "=$eag_ok\n";
}

bool ContainerNamesFromJson(const std::string& body, std::vector<std::string>* names) {
  const nlohmann::json j = nlohmann::json::parse(body, nullptr, false);
  if (!j.is_array()) return false;
  for (const auto& c : j) {
    if (!c.is_object()) continue;
    // docker's CLI prints a container's names without the API's leading
    // '/', joined by ','.
    const nlohmann::json n = c.value("Names", nlohmann::json());
    std::string joined;
    if (n.is_array())
      for (const auto& s : n) {
        if (!s.is_string() || s.get<std::string>().empty()) continue;
        std::string name = s.get<std::string>();
        if (!name.empty() && name[0] == '/') name.erase(0, 1);
        joined += (joined.empty() ? "" : ",") + name;
      }
    if (!joined.empty()) names->push_back(joined);
  }
  return true;
}

}  // namespace fleet
