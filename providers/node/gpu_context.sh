#!/bin/sh
# shellcheck disable=SC2034 # $fpa is read by node_gpu.sh
# Whether fleet-probe may create a CUDA context: sets $fpa to its arguments
# ("" or "--no-context") and prints the gpu_context line, from what
# ServeListingScript (run before it) found: $fsl (listed, api, no-engine,
# or an engine error) and $gcs (the serving containers, or the error).
# With gpu_context_mode=always (`fleet probe --gpu`), always a context.
# Embedded in fleet at build time (kGpuContextScript) and run inside the
# node facts probe's own shell, after `gpu_context_mode=auto|always`
# (quoted once by fleet). Defines only $fpa.
fpa=--no-context
if [ "${gpu_context_mode?}" = always ]; then
  fpa=
  echo gpu_context=asked
else
  case ${fsl-} in
  no-engine)
    fpa=
    echo gpu_context=no-engine
    ;;
  listed)
    if [ -n "${gcs-}" ]; then
      printf 'gpu_context=serving:%s\n' "${gcs-}"
    else
      fpa=
      echo gpu_context=idle
    fi
    ;;
  api)
    # The API's JSON is read on the controller: the names are added there.
    if [ -n "${gcs-}" ]; then
      echo gpu_context=serving:
    else
      fpa=
      echo gpu_context=idle
    fi
    ;;
  *) printf 'gpu_context=engine-error:%s\n' "${gcs-}" ;;
  esac
fi
