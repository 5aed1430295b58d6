// The fleet-probe builds this fleet binary carries (the release builds:
// meson -Dprobe_binaries=x86_64=...,aarch64=..., scripts/package.sh), by the
// `uname -m` of the machines they run on. A plan uploads the one of a
// node's architecture, so that no node needs a compiler. Empty in a
// development build: there the build beside fleet is uploaded to nodes of
// the controller's architecture (providers/probe/probe_provider.h).
#ifndef FLEET_SRC_PROBE_PROBE_BINARIES_H_
#define FLEET_SRC_PROBE_PROBE_BINARIES_H_

#include <string>
#include <string_view>
#include <vector>

namespace fleet {

struct EmbeddedProbe {
  std::string arch;         // `uname -m`: x86_64, aarch64
  std::string_view binary;  // the whole executable
};

// Generated (src/probe/embed_binaries.py).
std::vector<EmbeddedProbe> EmbeddedProbes();

}  // namespace fleet

#endif  // FLEET_SRC_PROBE_PROBE_BINARIES_H_
