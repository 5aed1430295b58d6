// One probe script per node: the read-only fragments of every resource on
// the node, concatenated, each framed by markers so one round trip reads
// them all and the output splits back per resource.
#ifndef FLEET_SRC_ENGINE_PROBE_SCRIPT_H_
#define FLEET_SRC_ENGINE_PROBE_SCRIPT_H_

#include <map>
#include <string>
#include <utility>
#include <vector>

namespace fleet {

struct ProbeFragment {
  std::string address;
  std::string script;
};

// `nonce` makes the markers unguessable to whatever a fragment prints.
// Each fragment runs in its own subshell, so an `exit` in one does not cut
// the others short.
std::string BuildProbeScript(const std::vector<ProbeFragment>& fragments, const std::string& nonce);

struct ProbeSection {
  std::string output;
  int exit_code = -1;  // -1: the end marker never came
};

// Splits the script's stdout back into one section per address.
std::map<std::string, ProbeSection> SplitProbeOutput(const std::string& output,
                                                     const std::string& nonce);

}  // namespace fleet

#endif  // FLEET_SRC_ENGINE_PROBE_SCRIPT_H_
