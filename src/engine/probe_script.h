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
// Each fragment runs in the script's own shell, one after the other, with
// no positional parameters: a subshell each was a fork each, ~2 ms of a
// node's CPU on every plan (issue 48). So a fragment must leave that shell
// running and as it found it (Provider::ProbeScript says how); one that
// ends it (an `exit`) leaves its own section without an end marker
// (exit_code -1) and the sections after it missing.
std::string BuildProbeScript(const std::vector<ProbeFragment>& fragments, const std::string& nonce);

struct ProbeSection {
  std::string output;
  int exit_code = -1;  // -1: the end marker never came (the shell ended inside)
};

// Splits the script's stdout back into one section per address.
std::map<std::string, ProbeSection> SplitProbeOutput(const std::string& output,
                                                     const std::string& nonce);

}  // namespace fleet

#endif  // FLEET_SRC_ENGINE_PROBE_SCRIPT_H_
