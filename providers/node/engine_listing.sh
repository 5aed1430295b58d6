#!/bin/sh
# shellcheck disable=SC2034 # $elq, $elg, $elp and $gcs are read by node_gpu.sh and gpu_context.sh
# The node's fleet serves and, with $eli, its images, as its container
# engine lists them (engine_listing.h says why the API before the CLI).
# Prints the fleet_serves line ("fleet_serves=HOW:NAMES", or
# "fleet_serves=api:" and the API's answer as "engine_api=" lines), then
# runs $elb, then prints the image listing ($eli's lines, or "images=api").
# podman with no API service: the installed probe reads podman's own
# storage instead (`fleet-probe --podman-store`, the same answer), and the
# CLI lists only where it refuses.
# Leaves $fsl and $gcs for gpu_context.sh ($fsl api: $gcs is non-empty when
# a fleet serve may run) and $elq ("1" when the installed fleet-probe knows
# --api, and so ends its GPU run itself: node_gpu.sh drops `timeout`).
# With $eld, $elp ("1" when the installed probe read the GPU in the same
# start as the API, `--api-gpu`: issue 48) and $elg (that GPU document) for
# node_gpu.sh, which then starts no probe of its own; else both "".
# Embedded in fleet at build time (kEngineListingScript) and run inside the
# node facts probe's own shell, after one assignment per value (quoted once
# by fleet):
#   elc  the container CLI ("docker" or "podman")
#   ele  sh that sets $els to the engine's API socket, or "" (engine_socket.sh)
#   elu  the API's path of the running fleet serves
#   elf  the installed fleet-probe, from $HOME
#   elk  the CLI's command that lists the fleet serves, "serving=NAME" lines
#   eli  sh that lists the images (image_listing.sh), or "" for none
#   elb  sh that runs after the fleet_serves line ("" for nothing): beside
#        the CLI's image listing, so that the node waits for about one CLI
#        start (a plan's probe: fleet-probe and the fabric)
#   eld  the GPU context mode ("auto" or "always") where the installed
#        probe reads the GPU with the API (the node facts probe, node_gpu.sh
#        in $elb), or "" for the API alone
# What follows the probe's "@gpu=" marker in $ela is the GPU document:
# moved to $elg, with $elp=1 and $elr=0 (the answer before it is whole).
el_gpu_split() {
  case $ela in
    *"
@gpu="*)
      elg=${ela#*"
@gpu="}
      ela=${ela%%"
@gpu="*}
      elp=1
      elr=0
      ;;
  esac
}
ela=
els=
elq=
elg=
elp=
if ! command -v "${elc?}" >/dev/null 2>&1; then
  fsl=no-engine
  gcs=
else
  eval "${ele?}"
  if [ -n "$els" ]; then
    # One read of the serves (and the images), kept only when every answer
    # was a 200 (a line "@api=CODE" can only come from the reader: JSON
    # escapes its newlines). The reader is fleet's installed probe
    # (`fleet-probe --api`, one process of ~4 ms); curl (~18 ms to load)
    # only where that probe does not run or refuses --api (exit 2: installed
    # before it knew the flag). Any other failure of the probe (no answer,
    # a short one, its 10 s deadline) is the engine's, which curl would meet
    # too: the CLI answers then.
    # With $eld the probe reads the API and the GPU in one process
    # (`fleet-probe --api-gpu MODE`, a start less on every plan of the
    # node). What follows its "@gpu=" marker is the GPU document; the marker
    # comes only after every answer was a 200, so the answer before it is
    # whole. A probe installed before it knew --api-gpu exits 2, and --api
    # alone reads the API as before.
    elr=127
    [ -x "$HOME/${elf?}" ] && {
      if [ -n "${eld?}" ]; then
        if [ -n "${eli?}" ]; then
          ela=$("$HOME/$elf" --api-gpu "$eld" "$els" "${elu?}" /images/json 2>/dev/null)
        else
          ela=$("$HOME/$elf" --api-gpu "$eld" "$els" "${elu?}" 2>/dev/null)
        fi
        elr=$?
        el_gpu_split
      fi
      if [ -z "$eld" ] || { [ -z "$elp" ] && [ "$elr" = 2 ]; }; then
        if [ -n "$eli" ]; then
          ela=$("$HOME/$elf" --api "$els" "${elu?}" /images/json 2>/dev/null)
        else
          ela=$("$HOME/$elf" --api "$els" "$elu" 2>/dev/null)
        fi
        elr=$?
      fi
    }
    case $elr in
      2 | 126 | 127)
        ela=
        if command -v curl >/dev/null 2>&1; then
          if [ -n "$eli" ]; then
            ela=$(curl -sg --max-time 10 --unix-socket "$els" -w '\n@api=%{http_code}\n' \
              "http://localhost$elu" 'http://localhost/images/json' 2>/dev/null) || ela=
          else
            ela=$(curl -sg --max-time 10 --unix-socket "$els" -w '\n@api=%{http_code}\n' \
              "http://localhost$elu" 2>/dev/null) || ela=
          fi
        fi
        ;;
      *)
        elq=1
        [ "$elr" = 0 ] || ela=
        ;;
    esac
  elif [ "$elc" = podman ] && [ -x "$HOME/${elf?}" ]; then
    # podman with no API service: the installed probe reads podman's own
    # storage (`fleet-probe --podman-store`, issue 48) and prints what --api
    # would, in one start instead of two podman starts and their conmons.
    # It refuses (exit 3, or 2 where installed before it knew the flag)
    # whenever it is not sure to read what podman would, and the CLI
    # answers. With $eld, the GPU in the same start, as --api-gpu.
    elr=127
    if [ -n "${eld?}" ]; then
      if [ -n "${eli?}" ]; then
        ela=$("$HOME/$elf" --podman-store-gpu "$eld" "${elu?}" /images/json 2>/dev/null)
      else
        ela=$("$HOME/$elf" --podman-store-gpu "$eld" "${elu?}" 2>/dev/null)
      fi
      elr=$?
      el_gpu_split
    elif [ -n "${eli?}" ]; then
      ela=$("$HOME/$elf" --podman-store "${elu?}" /images/json 2>/dev/null)
      elr=$?
    else
      ela=$("$HOME/$elf" --podman-store "${elu?}" 2>/dev/null)
      elr=$?
    fi
    # It knows --api too (and so its GPU run's deadline) unless it is older.
    case $elr in 2 | 126 | 127) ;; *) elq=1 ;; esac
    [ "$elr" = 0 ] || ela=
  fi
  if [ -n "$ela" ]; then
    if [ -n "$eli" ]; then
      case $ela in *"
@api=200
"*"
@api=200") ;; *) ela= ;; esac
    else
      case $ela in *"
@api=200") ;; *) ela= ;; esac
    fi
  fi
  if [ -n "$ela" ]; then
    fsl=api
    gcs=api
    case $ela in '[]'*) gcs= ;; esac
  else
    fsl=cli
  fi
fi

# The images: $eli in a function, so that it can run in the background.
ell() { eval "$eli"; }

# The serves' line, then $elb. The CLI's names are picked out of its lines
# by the shell itself (a sed and a tr were ~2 ms of a plan's wait on the
# node): split at newlines only, with `set -f` so that no line is taken for
# a file pattern.
elm() {
  if [ "$fsl" = cli ]; then
    if gcs=$(eval "${elk?}" 2>&1); then
      fsl=listed
      set -f
      elo=$IFS
      IFS='
'
      eln=
      for l in $gcs; do
        case $l in serving=*) eln="$eln${l#serving=} " ;; esac
      done
      IFS=$elo
      set +f
      gcs=$eln
    else
      fsl=engine-error
      gcs=$(printf '%s' "$gcs" | head -n 1 | cut -c1-300)
    fi
  fi
  if [ "$fsl" = api ]; then
    echo fleet_serves=api:
    # Each line prefixed in this shell, not by a `printf | while read`
    # pipeline: its two forks ran in every plan of a node that answers.
    elv=$ela
    while :; do
      case $elv in
        *"
"*)
          printf 'engine_api=%s\n' "${elv%%"
"*}"
          elv=${elv#*"
"}
          ;;
        *)
          printf 'engine_api=%s\n' "$elv"
          break
          ;;
      esac
    done
  else
    printf 'fleet_serves=%s:%s\n' "$fsl" "$gcs"
  fi
  eval "${elb?}"
}

if [ "$fsl" = cli ] && [ -n "$eli" ]; then
  # elm in the background beside the image listing, inside a command
  # substitution that keeps ell's lines: elm writes to the script's own
  # output (fd 9), and ell's lines follow once both have ended, whole and in
  # order (no temp file: mktemp and rm were ~3 ms of the node's side; nor a
  # `cat` draining a pipe, a process more). elm's stdin is /dev/null, so
  # that nothing in it reads what is not its own.
  { elx=$( { elm </dev/null >&9 9>&- & } ; ell 2>&1 9>&-; wait); } 9>&1
  printf '%s\n' "$elx"
else
  elm
  if [ -n "$eli" ]; then
    if [ "$fsl" = api ]; then echo images=api; else ell; fi
  fi
fi
