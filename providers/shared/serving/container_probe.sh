#!/bin/sh
# One serving container on its node: its inspect, and then
#   running:  its health (cpr_health), where it has a health URL;
#   not:      whether its port is busy (cpr_busy) and which fleet serves run
#             (cpr_serving), where the probe asks.
# Prints "cli=missing", or the inspect (the engine API's answer whole on an
# "inspect_api=" line after "inspect_cli=CLI", or the CLI's "state=",
# "exit_code=", ... lines; then "now=SECONDS"), "absent=1" or "error=TEXT";
# then what the parts it runs print. ParseContainerProbe reads it all.
# Embedded in fleet at build time (kContainerProbeScript) and run inside the
# probe's own shell (one per node per plan, and each health wait's poll),
# after one assignment per value, quoted once by fleet:
#   cpr_cli      the container CLI (docker or podman)
#   cpr_name     the container
#   cpr_format   the CLI inspect's --format (one value per line)
#   cpr_api      sh (node provider's, eval'd): the inspect through the
#                engine's API; sets $fd_api to 1 when the API answered for
#                the container (200 or 404), with the answer in $fd_out
#   cpr_health   sh (health_check.sh, eval'd) or ""
#   cpr_busy     sh printing "port_busy=0|1" (eval'd) or ""
#   cpr_serving  sh listing the fleet serves (eval'd) or ""
# Sets $fd_run when the container runs.
if ! command -v "${cpr_cli?}" >/dev/null 2>&1; then
  echo cli=missing
else
  eval "${cpr_api?}"
  fd_run=
  if [ -n "${fd_api-}" ]; then
    # The answer's JSON goes to the controller whole (ContainerProbeFromJson).
    case ${fd_out-} in
    *"
@api=404") echo absent=1 ;;
    *)
      printf 'inspect_cli=%s\ninspect_api=%s\nnow=%s\n' "$cpr_cli" "$fd_out" "$(date +%s)"
      case $fd_out in *'"State":{"Status":"running"'*) fd_run=1 ;; esac
      ;;
    esac
  else
    fd_out=$("$cpr_cli" container inspect --format "${cpr_format?}" "${cpr_name?}" 2>&1) && fd_rc=0 || fd_rc=$?
    if [ "$fd_rc" = 0 ]; then
      printf '%s\n' "$fd_out"
      echo "now=$(date +%s)"
      case $fd_out in *state=running*) fd_run=1 ;; esac
    else
      # What docker and podman print for a container that does not exist
      # (kNoSuchContainerPattern): absent, not an engine error.
      case $fd_out in
      *[Nn]'o such container'*|*'container not known'*) echo absent=1 ;;
      *) printf 'error=%s\n' "$(printf '%s' "$fd_out" | tr '\n' ' ')" ;;
      esac
    fi
  fi
  if [ -n "$fd_run" ]; then
    [ -z "${cpr_health?}" ] || eval "$cpr_health"
  else
    if [ -n "${cpr_busy?}" ]; then
      fd_busy=$(eval "$cpr_busy")
      echo "$fd_busy"
    fi
    [ -z "${cpr_serving?}" ] || eval "$cpr_serving" 2>/dev/null
  fi
fi
