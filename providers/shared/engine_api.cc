#include "providers/shared/engine_api.h"

#include <nlohmann/json.hpp>

#include "providers/shared/container_labels.h"
#include "src/probe/probe_install.h"
#include "src/shell_quote.h"

namespace fleet {

std::string ServingContainersApiPath() {
  return std::string("/containers/json?filters=%7B%22label%22%3A%5B%22") + kDeploymentLabel +
         "%22%5D%7D";
}

// Not under a docker context or a remote DOCKER_HOST (the CLI's engine is
// elsewhere), and podman's only while its service already runs (a
// socket-activated one would start on the first call).
std::string EngineSocketScript(const std::string& cli) {
  if (cli == "docker")
    return "  edc=${DOCKER_CONFIG:-$HOME/.docker}/config.json\n"
           "  if [ -z \"${DOCKER_CONTEXT-}\" ] && { [ ! -f \"$edc\" ] || ! grep -q "
           "'\"currentContext\"' \"$edc\" 2>/dev/null; }; then\n"
           "    case ${DOCKER_HOST-} in\n"
           "    unix://*) els=${DOCKER_HOST#unix://} ;;\n"
           "    '') els=/run/docker.sock; [ -S \"$els\" ] || els=/var/run/docker.sock ;;\n"
           "    esac\n"
           "    [ -S \"$els\" ] || els=\n"
           "  fi\n";
  if (cli == "podman")
    return "  eps=${XDG_RUNTIME_DIR:-/nonexistent}/podman/podman.sock\n"
           "  if [ -z \"${CONTAINER_HOST-}\" ] && [ -S \"$eps\" ] && { [ ! -d "
           "\"$XDG_RUNTIME_DIR/systemd\" ] || systemctl --user is-active --quiet podman.service "
           "2>/dev/null; }; then els=$eps; fi\n";
  return "";
}

std::string ProbeApiReadScript(const std::string& out, const std::string& rc,
                               const std::string& quoted_paths) {
  const std::string probe = std::string("\"") + kInstalledProbe + "\"";
  return rc + "=127; [ -x " + probe + " ] && { " + out + "=$(" + probe + " --api \"$els\" " +
         quoted_paths + " 2>/dev/null); " + rc + "=$?; }\n";
}

std::string PrefixedLinesScript(const std::string& value, const std::string& prefix) {
  return "printf '%s\\n' " + value + " | while IFS= read -r l; do printf '" + prefix +
         "%s\\n' \"$l\"; done\n";
}

std::string ProbeApiGetScript(const std::string& out, const std::string& answered,
                              const std::string& path, std::initializer_list<const char*> codes) {
  std::string wanted;
  for (const char* c : codes)
    wanted += std::string(wanted.empty() ? "" : " | ") + "*\"\n@api=" + c + "\"";
  const std::string rc = out + "_rc";
  return answered + "=\nif [ -n \"$els\" ]; then\n  " +
         ProbeApiReadScript(out, rc, ShellQuote(path)) + "  [ $" + rc + " != 0 ] || case $" + out +
         " in " + wanted + ") " + answered + "=1 ;; esac\nfi\n";
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
