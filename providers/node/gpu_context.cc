#include "providers/node/gpu_context.h"

#include <sstream>

#include "providers/node/engine_listing.h"
#include "providers/node/gpu_context_sh.h"
#include "src/shell_quote.h"

namespace fleet {

namespace {

constexpr const char* kServingPrefix = "serving:";

}  // namespace

std::string ServeListingScript(const std::string& cli) {
  return EngineListingScript(cli, false, "");
}

ServeListing ParseServeListing(const std::string& value) {
  ServeListing l;
  const size_t colon = value.find(':');
  const std::string word = value.substr(0, colon);
  const std::string rest = colon == std::string::npos ? "" : value.substr(colon + 1);
  if (word == "listed") {
    l.listed = true;
    std::istringstream names(rest);
    for (std::string n; names >> n;) l.names.push_back(n);
  } else if (word == "no-engine") {
    l.listed = true;
  } else {
    l.error = word.empty() ? "not listed (the node's probe script predates the listing)"
                           : "the container CLI cannot list containers" +
                                 (rest.empty() ? std::string() : " (" + rest + ")");
  }
  return l;
}

std::string GpuContextScript(GpuContextMode mode) {
  // Inline, not `sh -c`: it runs in the node facts probe on every plan.
  return "gpu_context_mode=" + ShellQuote(mode == GpuContextMode::kAlways ? "always" : "auto") +
         "\n" + std::string(kGpuContextScript, kGpuContextScriptSize);
}

GpuContextDecision ParseGpuContext(const std::string& value) {
  if (value.empty()) return {true, "a CUDA context (the node's probe script predates the choice)"};
  if (value == "asked") return {true, "a CUDA context, as asked (--gpu)"};
  if (value == "idle") return {true, "a CUDA context: no fleet serve runs on the node"};
  if (value == "no-engine")
    return {true, "a CUDA context: no container CLI on the node, so no fleet serve"};
  if (value.rfind(kServingPrefix, 0) == 0) {
    std::string names = value.substr(std::string(kServingPrefix).size());
    while (!names.empty() && names.back() == ' ') names.pop_back();
    return {false, "no CUDA context: fleet serve " + names +
                       " runs on the node (fleet probe NODE --gpu creates one anyway)"};
  }
  const std::string engine_error = "engine-error";
  if (value.rfind(engine_error, 0) == 0) {
    std::string why = value.substr(engine_error.size());
    if (!why.empty() && why[0] == ':') why.erase(0, 1);
    return {false, "no CUDA context: the container CLI cannot list containers" +
                       (why.empty() ? std::string() : " (" + why + ")") +
                       ", so a serve may run (fleet probe NODE --gpu creates one anyway)"};
  }
  return {false, "no CUDA context: unknown decision '" + value + "'"};
}

}  // namespace fleet
