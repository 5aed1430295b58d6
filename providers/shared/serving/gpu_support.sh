#!/bin/sh
# How the node's container CLI can give a container GPUs, for the probe of a
# serve that asks for them (GpuSupportError reads it): "gpu_cdi=0|1" (a CDI
# spec naming nvidia.com/gpu in one of the spec folders); for a CLI other
# than podman also "gpu_hook=0|1" (nvidia-container-runtime-hook on PATH)
# and "gpu_runtime=0|1" (an nvidia runtime in `CLI info`).
# Embedded in fleet at build time (kGpuSupportScript) and run at the end of
# the serve's probe fragment, after `set -- CLI SPEC_FOLDER...` (each
# quoted once by fleet).
gsp_cli=$1
shift
gsp_cdi=0
for gsp_dir in "$@"; do
  for gsp_spec in "$gsp_dir"/*.yaml "$gsp_dir"/*.json; do
    [ -f "$gsp_spec" ] && grep -q 'nvidia.com/gpu' "$gsp_spec" 2>/dev/null && gsp_cdi=1
  done
done
echo "gpu_cdi=$gsp_cdi"
if [ "$gsp_cli" != podman ]; then
  if command -v nvidia-container-runtime-hook >/dev/null 2>&1; then
    echo gpu_hook=1
  else
    echo gpu_hook=0
  fi
  case $("$gsp_cli" info --format '{{json .Runtimes}}' 2>/dev/null) in
    *'"nvidia'*) echo gpu_runtime=1 ;;
    *) echo gpu_runtime=0 ;;
  esac
fi
