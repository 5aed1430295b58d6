// Where fleet installs fleet-probe on a node (the probe.<node> step,
// providers/probe/): every node-side script and the installer name the
// program from here.
#ifndef FLEET_SRC_PROBE_PROBE_INSTALL_H_
#define FLEET_SRC_PROBE_PROBE_INSTALL_H_

#include <string_view>

namespace fleet {

// Relative to the node user's home, where SFTP and exec channels start.
inline constexpr char kProbeInstallDir[] = ".fleet/bin";
inline constexpr char kProbeInstallPath[] = ".fleet/bin/fleet-probe";
// Beside it: the SHA-256 of the source it was built from, one line.
inline constexpr char kProbeVersionFile[] = ".fleet/bin/fleet-probe.sha256src";
// The same program as sh spells it from any directory.
inline constexpr char kInstalledProbe[] = "$HOME/.fleet/bin/fleet-probe";
// sh: $fp names the installed probe, else a fleet-probe on PATH ("" when
// neither; the caller checks `[ -n "$fp" ] && [ -x "$fp" ]`).
inline constexpr char kFindProbeScript[] =
    "fp=\"$HOME/.fleet/bin/fleet-probe\"; [ -x \"$fp\" ] || fp=$(command -v fleet-probe "
    "2>/dev/null)\n";

// The three spell one path.
static_assert(std::string_view(kInstalledProbe).substr(6) == kProbeInstallPath);
static_assert(std::string_view(kFindProbeScript).find(kInstalledProbe) == 4);
static_assert(std::string_view(kProbeInstallPath).starts_with(kProbeInstallDir));
static_assert(std::string_view(kProbeVersionFile).starts_with(kProbeInstallPath));

}  // namespace fleet

#endif  // FLEET_SRC_PROBE_PROBE_INSTALL_H_
