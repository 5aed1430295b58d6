// Whether a node's container engine can be used, told from what its CLI
// printed when a probe command failed, and the plan error that names the fix.
//
// The image, deployment and display RAM probes already run the node's
// container CLI (image inspect, container inspect, ps); when one fails, its
// output says why: the CLI is not installed, the daemon does not answer
// (Docker installed but not running: "Cannot connect to the Docker daemon"),
// the user may not use it (not in the docker group: "permission denied" on
// the socket), or rootless podman lacks subordinate ids. The plan turns that
// into an error before anything is applied, never a step that fails half way.
// No command runs for this on a node whose engine answers.
#ifndef FLEET_PROVIDERS_SHARED_ENGINE_CHECK_H_
#define FLEET_PROVIDERS_SHARED_ENGINE_CHECK_H_

#include <string>

#include "manifests/manifest.h"

namespace fleet {

enum class EngineProblem {
  kNone,              // not an engine problem (e.g. a missing image, a broken reference)
  kCliMissing,        // the CLI is not on the node's PATH
  kDaemonDown,        // the Docker daemon does not answer
  kPermissionDenied,  // the user may not use the daemon's socket
  kNoSubordinateIds,  // rootless podman without /etc/subuid, /etc/subgid ranges
};

// Classifies `output` (stdout and stderr of a failed `<cli> ...` command).
EngineProblem ClassifyEngineOutput(const std::string& output);

// The plan error for `problem` on `node`, whose SSH user is `user`: what is
// wrong, then the fix (e.g. `sudo systemctl start docker`, `sudo usermod -aG
// docker USER`). `output` is quoted shortened, as evidence.
std::string EngineFixMessage(EngineProblem problem, const std::string& cli, const std::string& node,
                             const std::string& user, const std::string& output);

// `error` (a probe's error text) with the fix appended when it is an engine
// problem; `error` unchanged otherwise.
std::string WithEngineFix(const std::string& error, const std::string& cli, const std::string& node,
                          const std::string& user);

// The SSH user fleet logs in as on `node` (empty when unknown), for the fix.
std::string NodeSshUser(const Manifest* m, const std::string& node);

}  // namespace fleet

#endif  // FLEET_PROVIDERS_SHARED_ENGINE_CHECK_H_
