// The GPUs a serve asks for (recipe `gpus`), as each engine's `run` options,
// and whether a node can give them, read by the deployment's probe.
//
// Docker: `--gpus all|N|"device=0,1"` (what the DGX Spark tools pass), which
// needs the NVIDIA Container Toolkit: dockerd offers its GPU driver when
// `nvidia-container-runtime-hook` is on its PATH, or an `nvidia` runtime is
// configured (DGX OS). Without it `docker run --gpus` fails with `could not
// select device driver "" with capabilities: [[gpu]]`. Podman: CDI devices
// `--device nvidia.com/gpu=all` (a count N becomes ids 0..N-1), which need a
// CDI spec for nvidia.com/gpu under /etc/cdi or /var/run/cdi. The plan
// refuses a serve the node cannot give GPUs to and says what to install.
#ifndef FLEET_PROVIDERS_SHARED_SERVING_GPU_REQUEST_H_
#define FLEET_PROVIDERS_SHARED_SERVING_GPU_REQUEST_H_

#include <map>
#include <string>
#include <vector>

#include "manifests/manifest.h"
#include "providers/shared/serving/deployment_json.h"
#include "src/resource.h"

namespace fleet {

// "all", "2", "0,1" (ids joined) or "" (no GPU asked for): how a plan shows it.
std::string GpuRequestText(const Recipe& r);

// The `run` options for the recipe's GPUs, IPC mode and ulimits on `cli`.
std::vector<std::string> GpuRunOptions(const std::string& cli, const Recipe& r);

// Where the NVIDIA Container Toolkit writes its CDI specs.
inline const std::vector<std::string> kCdiSpecDirs = {"/etc/cdi", "/var/run/cdi"};

// A read-only probe fragment printing gpu_hook=, gpu_runtime=, gpu_cdi=
// (each 0 or 1) for `cli`'s way of giving GPUs; gpu_cdi from the specs in
// `cdi_dirs` (a test's own folders).
std::string GpuSupportProbeScript(const std::string& cli,
                                  const std::vector<std::string>& cdi_dirs = kCdiSpecDirs);

// "" when the probe's key=values say `cli` on `node` can give GPUs; else the
// plan error naming what to install.
std::string GpuSupportError(const std::string& cli, const std::string& node,
                            const std::map<std::string, std::string>& probe);

// For the deployment provider: the probe's gpu_* facts into `found`
// (ContainerProbe::gpu_support) when `want` asks for GPUs (shown.gpus), and
// the plan error ("" when none) for a serve about to start where they cannot
// be given (`desired`'s attributes a DeploymentWant, `actual`'s a ContainerProbe).
void RecordGpuSupport(const DeploymentWant& want, const std::string& probe_output,
                      ContainerProbe* found);
std::string GpuPlanError(const DesiredResource& desired, const ActualResource& actual);

}  // namespace fleet

#endif  // FLEET_PROVIDERS_SHARED_SERVING_GPU_REQUEST_H_
