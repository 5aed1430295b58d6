// When fleet-probe may create a CUDA context on a node.
//
// Why it matters: fleet-probe reads free GPU memory with cuMemGetInfo, which
// needs a CUDA context in the probe's process. On a unified-memory node
// (GB10) running a serve at 90 % of memory, that context costs time and
// memory the serve owns; a plan must not disturb a serve. So the node's
// probe script decides, on the node and in the same round trip:
//   - kAlways (the operator asked: `fleet probe NODE --gpu`): a context;
//   - kAuto (every plan): a context only when no fleet serve runs there
//     (no container labelled fleet.deployment; no container CLI at all);
//     while one runs, or when the CLI cannot list containers (a serve may
//     run), `fleet-probe --no-context`: figures that need no context (NVML
//     where it answers, the host's MemAvailable on unified memory).
// The script prints one `gpu_context=<word>[:<serves>]` line; the parser
// turns it into the decision and the reason the facts carry.
#ifndef FLEET_PROVIDERS_NODE_GPU_CONTEXT_H_
#define FLEET_PROVIDERS_NODE_GPU_CONTEXT_H_

#include <string>

namespace fleet {

enum class GpuContextMode { kAuto, kAlways };

// sh that sets $fpa to the arguments for fleet-probe ("" or "--no-context")
// and prints the gpu_context line. `cli` is the node's container CLI.
// Defines only $fpa and $gcs.
std::string GpuContextScript(const std::string& cli, GpuContextMode mode);

struct GpuContextDecision {
  bool create = true;  // fleet-probe ran with a context
  std::string why;     // for the facts and `fleet probe`, e.g. "no fleet serve runs"
};

// The decision from the value of the script's gpu_context line ("" when the
// line is missing: an older script, which always created one).
GpuContextDecision ParseGpuContext(const std::string& value);

}  // namespace fleet

#endif  // FLEET_PROVIDERS_NODE_GPU_CONTEXT_H_
