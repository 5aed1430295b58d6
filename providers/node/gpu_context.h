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
//     where it answers, the host's MemFree on unified memory: the figure
//     cuMemGetInfo gives there, so the same with and without a context).
// Whatever this script decides, fleet-probe itself creates no context while
// any process holds a GPU (fleet's or not: NVML's process list, or an open
// /dev/nvidia<N>); the facts' context_decision then names that process.
// The script prints one `gpu_context=<word>[:<serves>]` line; the parser
// turns it into the decision and the reason the facts carry.
//
// The listing it decides from (ServeListingScript) runs on every node
// probe, fleet-probe or not, and is a node fact of its own: the plan names
// the fleet serves on a node that no state record knows from it.
#ifndef FLEET_PROVIDERS_NODE_GPU_CONTEXT_H_
#define FLEET_PROVIDERS_NODE_GPU_CONTEXT_H_

#include <string>
#include <vector>

namespace fleet {

enum class GpuContextMode { kAuto, kAlways };

// sh that lists the running containers labelled fleet.deployment with the
// node's container CLI `cli` and prints one `fleet_serves=<word>:<rest>`
// line: "listed:<names, each followed by a space>", "no-engine:" (no CLI)
// or "engine-error:<its first line>" (or "api:", EngineListingScript's
// answer). Defines $fsl (the word) and $gcs (the rest), which
// GpuContextScript reads, besides engine_listing.sh's own $el* names.
std::string ServeListingScript(const std::string& cli);

// What the fleet_serves line says.
struct ServeListing {
  bool listed = false;             // the CLI answered (or there is none: nothing runs)
  std::vector<std::string> names;  // the serving containers
  std::string error;               // why the CLI could not list them
};

// The listing from the value of the fleet_serves line ("": the line is
// missing, an older script: not listed).
ServeListing ParseServeListing(const std::string& value);

// sh that sets $fpa to the arguments for fleet-probe ("" or "--no-context")
// and prints the gpu_context line, from what ServeListingScript (run
// before it) found. Defines only $fpa.
std::string GpuContextScript(GpuContextMode mode);

struct GpuContextDecision {
  bool create = true;  // fleet-probe ran with a context
  std::string why;     // for the facts and `fleet probe`, e.g. "no fleet serve runs"
};

// The decision from the value of the script's gpu_context line ("" when the
// line is missing: an older script, which always created one).
GpuContextDecision ParseGpuContext(const std::string& value);

}  // namespace fleet

#endif  // FLEET_PROVIDERS_NODE_GPU_CONTEXT_H_
