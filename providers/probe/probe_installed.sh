#!/bin/sh
# The probe provider's read of this node (ProbeProvider::ProbeScript):
# "installed=SHA" when fleet-probe is installed (SHA: the source sha256 its
# version file holds, "" when that file cannot be read) and "compiler=c++"
# when the node has a c++ to build one. `read`, not $(cat ...): no process
# on a converged node (this runs in every plan's probe).
# Embedded in fleet at build time (kProbeInstalledScript) and run inside the
# caller's shell after one assignment per value (quoted once by fleet):
#   pi_probe    the installed fleet-probe, from $HOME
#   pi_version  its version file, from $HOME
if [ -x "$HOME/${pi_probe?}" ]; then
  pv=
  { read -r pv <"$HOME/${pi_version?}"; } 2>/dev/null
  printf 'installed=%s\n' "$pv"
fi
command -v c++ >/dev/null 2>&1 && echo compiler=c++
