#include "providers/shared/engine_check.h"

#include <algorithm>
#include <cctype>

#include "providers/shared/cli_error.h"
#include "src/provider.h"

namespace fleet {

namespace {

bool Has(const std::string& haystack, const char* needle) {
  return haystack.find(needle) != std::string::npos;
}

std::string Evidence(const std::string& output) {
  std::string s = output;
  std::replace(s.begin(), s.end(), '\n', ' ');
  size_t b = s.find_first_not_of(' ');
  if (b == std::string::npos) return "";
  s = s.substr(b);
  if (s.size() > 200) s = s.substr(0, 200) + "...";
  return " (\"" + s + "\")";
}

}  // namespace

EngineProblem ClassifyEngineOutput(const std::string& output) {
  const std::string s = AsciiLower(output);
  if (Has(s, "permission denied while trying to connect to the docker daemon") ||
      (Has(s, "docker") && Has(s, ".sock") && Has(s, "permission denied")))
    return EngineProblem::kPermissionDenied;
  if (Has(s, "cannot connect to the docker daemon") || Has(s, "is the docker daemon running") ||
      Has(s, "failed to connect to the docker api") ||
      (Has(s, "docker.sock") && (Has(s, "connection refused") || Has(s, "no such file"))))
    return EngineProblem::kDaemonDown;
  if (Has(s, "no subuid ranges found") || Has(s, "no subgid ranges found") ||
      Has(s, "cannot find newuidmap") || Has(s, "newuidmap: write to uid_map failed"))
    return EngineProblem::kNoSubordinateIds;
  if (Has(s, "command not found") || Has(s, "not found on the node's path"))
    return EngineProblem::kCliMissing;
  return EngineProblem::kNone;
}

std::string EngineFixMessage(EngineProblem problem, const std::string& cli, const std::string& node,
                             const std::string& user, const std::string& output) {
  const std::string who = user.empty() ? "the node's SSH user" : "user " + user;
  const std::string u = user.empty() ? "USER" : user;
  switch (problem) {
    case EngineProblem::kNone:
      return "";
    case EngineProblem::kCliMissing:
      return "container_cli '" + cli + "' not found on the node's PATH (" + node + ")" +
             (cli == "docker" ? ": install Docker (`sudo apt-get install docker.io`, or DGX OS's "
                                "docker-ce) or set container_cli: podman"
                              : ": install podman (`sudo apt-get install podman`) or set "
                                "container_cli: docker");
    case EngineProblem::kDaemonDown:
      return "the Docker daemon does not answer on " + node + Evidence(output) +
             ": start it (`sudo systemctl start docker`; `sudo systemctl enable --now docker` "
             "to keep it started at boot)";
    case EngineProblem::kPermissionDenied:
      return who + " may not use the Docker daemon on " + node + Evidence(output) +
             ": add it to the docker group (`sudo usermod -aG docker " + u +
             "`, effective at its next login)";
    case EngineProblem::kNoSubordinateIds:
      return "rootless podman cannot run for " + who + " on " + node + Evidence(output) +
             ": give it subordinate ids (`sudo usermod --add-subuids 100000-165535 "
             "--add-subgids 100000-165535 " +
             u + "`, then `podman system migrate`)";
  }
  return "";
}

std::string WithEngineFix(const std::string& error, const std::string& cli, const std::string& node,
                          const std::string& user) {
  const EngineProblem p = ClassifyEngineOutput(error);
  if (p == EngineProblem::kNone) return error;
  return EngineFixMessage(p, cli, node, user, p == EngineProblem::kCliMissing ? "" : error);
}

std::string NodeSshUser(const Manifest* m, const std::string& node) {
  if (m == nullptr) return "";
  auto it = m->nodes.find(node);
  if (it == m->nodes.end()) return "";
  return EndpointFor(it->second).user;
}

}  // namespace fleet
