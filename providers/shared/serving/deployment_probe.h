// The deployment probe: a read-only sh fragment that asks the node's
// container CLI about one serving container (its state, its spec label, how
// long it has run) and, when it runs, asks its health URL on the node; when
// it does not run, whether something else already listens on its port.
#ifndef FLEET_PROVIDERS_SHARED_SERVING_DEPLOYMENT_PROBE_H_
#define FLEET_PROVIDERS_SHARED_SERVING_DEPLOYMENT_PROBE_H_

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "providers/shared/serving/deployment_spec.h"
#include "providers/shared/serving_containers.h"

namespace fleet {

// A shell `case` pattern matching what docker and podman print for a
// container that does not exist (docker: "Error: No such container: X";
// podman 4.3: "Error: inspecting object: no such container X"): the one
// failure of `container inspect` that means absent, not an engine error. Not
// "no such" alone: a broken storage says "no such file or directory".
// container_probe.sh spells it out (deployment_provider_test checks).
inline constexpr char kNoSuchContainerPattern[] =
    "*[Nn]'o such container'*|*'container not known'*";

struct ContainerProbe {
  bool cli_found = true;
  bool exists = false;
  std::string state;  // "running", "exited", "created", … ("" when absent)
  int exit_code = 0;
  std::string spec;         // the fleet.spec label
  std::string id;           // container ID
  std::string image;        // the ID of the image it runs (podman: bare hex)
  long age_s = -1;          // seconds since it started; -1 unknown
  int health = -1;          // HTTP status of the health URL; 0 no answer; -1 not asked
  std::string health_tool;  // "curl", "wget", "" (none on the node)
  // The health URL accepted the connection but gave no answer within the
  // probe's 5 s (curl's exit 28): a busy engine, or a hung one. curl only.
  bool health_timed_out = false;
  bool port_busy = false;  // something listens on the port (asked when not running)
  // When the port is busy: the running containers labelled fleet.deployment
  // (which of them may hold it).
  std::vector<std::string> serving;
  std::string error;  // an inspect failure other than "no such container"
  // The node's gpu_*=0|1 facts (GpuSupportProbeScript), recorded only for a
  // serve that asks for GPUs (RecordGpuSupport).
  std::map<std::string, std::string> gpu_support;
  // For a recipe with {rows:TENSOR} (row_placeholder.h): the rows of each
  // named tensor in the node's snapshot, or why they are not known.
  std::map<std::string, uint64_t> tensor_rows;
  bool rows_snapshot_missing = false;  // the model is not on the node (yet)
  std::string rows_error;              // e.g. the model has no such tensor

  bool Healthy() const { return health >= 200 && health < 300; }
  nlohmann::json ToJson() const;
  static ContainerProbe FromJson(const nlohmann::json& j);
};

// sh that prints the HTTP status of GET `url` (000 when nothing answers),
// with curl (and its exit code: 28 when the 5 s ran out), else wget; prints
// "none" when the node has neither (health_check.sh). Defines only
// $hc_url: safe inside the one probe script of a node.
std::string HealthCommand(const std::string& url);

// sh that prints "port_busy=1" when something listens on TCP `port` (IPv4 or
// IPv6), else "port_busy=0".
std::string PortBusyCommand(int port);

// The fragment for `spec` on its node: container_probe.sh (beside this
// file, embedded at build time) after its values, then, for a serve that
// asks for GPUs, GpuSupportProbeScript.
std::string ContainerProbeScript(const ContainerSpec& spec);

// The fragment for one poll of a health wait: the container's inspect, as
// ContainerProbeScript reads it, and while it runs HealthCommand(url) (none
// for an empty url). ParseContainerProbe reads it: state, exit_code and
// health.
std::string ContainerPollScript(const ContainerSpec& spec, const std::string& url);

// Parses the fragment's output ("key=value" lines).
ContainerProbe ParseContainerProbe(const std::string& output);

}  // namespace fleet

#endif  // FLEET_PROVIDERS_SHARED_SERVING_DEPLOYMENT_PROBE_H_
