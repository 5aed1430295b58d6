#!/bin/sh
# The node's GPUs, in the node facts probe: the fleet-probe when installed
# (it reads cuMemGetInfo, which works on unified-memory GB10 where
# nvidia-smi says [N/A]), one "gpu_probe=JSON" line; else nvidia-smi's CSV,
# "gpu_smi=" lines.
# Embedded in fleet at build time (kNodeGpuScript) and run inside the node
# facts probe's own shell, after one assignment per value (quoted once by
# fleet):
#   ngf_version_file  the installed probe's source sha256 file, from $HOME
#   ngf_install_path  the installed probe, from $HOME
#   ngf_source_sha    the sha256 of the probe source this fleet embeds
#   ngf_context       gpu_context.sh (sets $fpa), eval'd before the probe
#   ngf_drop_caches   drop_caches_sudo.sh (reads $gpj), eval'd after it
# Reads $fp (the probe found, or "") and $elq (the installed probe knows
# --api), which the probe's earlier parts set; with $elp=1 the installed
# probe read the GPU already, with the engine's API (`--api-gpu`, one
# process less: engine_listing.h), and $elg is its document.
# A driver hung in cuInit must not hang the whole plan: a probe that
# answered --api ($elq), or the installed one built from this fleet's
# source, ends itself after 20 s; any other gets timeout (a process more,
# ~2 ms on a node that lists with its CLI).
t=
[ -n "${elq-}" ] || {
  fpv=
  { read -r fpv <"$HOME/${ngf_version_file?}"; } 2>/dev/null
  # shellcheck disable=SC2015 # the braces run when either test fails
  [ "$fp" = "$HOME/${ngf_install_path?}" ] && [ "$fpv" = "${ngf_source_sha?}" ] || {
    command -v timeout >/dev/null 2>&1 && t='timeout 20'
  }
}
if [ -n "${elp-}" ] || { [ -n "$fp" ] && [ -x "$fp" ]; }; then
  # The gpu_context line (and $fpa): with $elp the probe took the same
  # decision from the same answer.
  eval "${ngf_context?}"
  # One line for the parser; tr only when the answer has more.
  if [ -n "${elp-}" ]; then
    gpj=${elg-}
  else
    # shellcheck disable=SC2086 # $t and $fpa are words or nothing
    gpj=$($t "$fp" ${fpa-} 2>/dev/null)
  fi
  case $gpj in *"
"*) gpj=$(printf '%s' "$gpj" | tr -d '\n') ;; esac
  printf 'gpu_probe=%s\n' "$gpj"
  eval "${ngf_drop_caches?}"
elif command -v nvidia-smi >/dev/null 2>&1; then
  nvidia-smi --query-gpu=index,name,uuid,memory.total,memory.free,driver_version \
    --format=csv,noheader,nounits 2>/dev/null | sed 's/^/gpu_smi=/'
fi
