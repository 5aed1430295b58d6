#include "providers/shared/serving/gpu_request.h"

#include <cstdlib>

#include "providers/shared/serving/gpu_support_sh.h"
#include "src/provider.h"
#include "src/shell_quote.h"

namespace fleet {

std::string GpuRequestText(const Recipe& r) {
  if (!r.gpus.empty()) return r.gpus;
  std::string ids;
  for (const std::string& id : r.gpu_ids) ids += (ids.empty() ? "" : ",") + id;
  return ids;
}

std::vector<std::string> GpuRunOptions(const std::string& cli, const Recipe& r) {
  std::vector<std::string> o;
  if (cli == "podman") {
    std::vector<std::string> ids = r.gpu_ids;
    if (r.gpus == "all") ids = {"all"};
    if (!r.gpus.empty() && r.gpus != "all")
      for (int i = 0; i < std::atoi(r.gpus.c_str()); ++i) ids.push_back(std::to_string(i));
    for (const std::string& id : ids) {
      o.push_back("--device");
      o.push_back("nvidia.com/gpu=" + id);
    }
  } else if (!r.gpus.empty()) {
    o.push_back("--gpus=" + r.gpus);
  } else if (!r.gpu_ids.empty()) {
    // The docker CLI reads --gpus as CSV: a list of ids is one quoted field.
    o.push_back("--gpus=\"device=" + GpuRequestText(r) + "\"");
  }
  if (!r.ipc.empty()) o.push_back("--ipc=" + r.ipc);
  for (const auto& [name, value] : r.ulimits) {
    o.push_back("--ulimit");
    o.push_back(name + "=" + value);
  }
  return o;
}

// gpu_support.sh (beside this file) with its values.
std::string GpuSupportProbeScript(const std::string& cli,
                                  const std::vector<std::string>& cdi_dirs) {
  std::string s = "set -- " + ShellQuote(cli);
  for (const std::string& dir : cdi_dirs) s += " " + ShellQuote(dir);
  return s + "\n" + std::string(kGpuSupportScript, kGpuSupportScriptSize);
}

std::string GpuSupportError(const std::string& cli, const std::string& node,
                            const std::map<std::string, std::string>& probe) {
  auto yes = [&](const char* k) {
    auto it = probe.find(k);
    return it != probe.end() && it->second == "1";
  };
  if (cli == "podman") {
    if (yes("gpu_cdi")) return "";
    return "podman on " + node +
           " has no CDI spec for nvidia.com/gpu (under /etc/cdi or /var/run/cdi): install the "
           "NVIDIA Container Toolkit and generate one (`sudo nvidia-ctk cdi generate "
           "--output=/etc/cdi/nvidia.yaml`)";
  }
  if (yes("gpu_hook") || yes("gpu_runtime")) return "";
  return "docker on " + node +
         " cannot give GPUs (no nvidia runtime, no nvidia-container-runtime-hook: `docker run "
         "--gpus` would fail with `could not select device driver`): install the NVIDIA "
         "Container Toolkit (`sudo apt-get install nvidia-container-toolkit`, then `sudo "
         "nvidia-ctk runtime configure --runtime=docker && sudo systemctl restart docker`)";
}

void RecordGpuSupport(const DeploymentWant& want, const std::string& probe_output,
                      ContainerProbe* found) {
  if (want.shown.gpus.empty()) return;
  for (const auto& [k, v] : ParseKeyValues(probe_output))
    if (k.rfind("gpu_", 0) == 0) found->gpu_support[k] = v;
}

std::string GpuPlanError(const DesiredResource& desired, const ActualResource& actual) {
  if (!actual.probed) return "";
  const DeploymentWant want = desired.attributes.get<DeploymentWant>();
  if (want.shown.gpus.empty()) return "";
  const ContainerProbe found = actual.attributes.get<ContainerProbe>();
  const std::string err = GpuSupportError(want.cli, desired.node, found.gpu_support);
  if (err.empty()) return "";
  return desired.address + ": gpus = \"" + want.shown.gpus + "\": " + err;
}

}  // namespace fleet
