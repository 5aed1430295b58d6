#!/bin/sh
# shellcheck disable=SC2034 # the caller reads $eag_out, $eag_rc and $eag_ok
# One GET of the container engine's API by the installed fleet-probe
# (`fleet-probe --api SOCKET PATH`: one process of ~4 ms, not a CLI start)
# on the socket $els (engine_socket.sh, run before it): $eag_out is the
# answer's body, a newline and "@api=CODE" (its HTTP status), $eag_rc the
# probe's exit status (127: no installed probe; "" without a socket), and
# $eag_ok 1 when the engine answered with one of the codes in $eag_codes,
# else "".
# Embedded in fleet at build time (kEngineApiGetScript) and run inside the
# caller's shell after one assignment per value (quoted once by fleet):
#   eag_probe  the installed fleet-probe, from $HOME
#   eag_path   the API's path (e.g. /images/ID/json)
#   eag_codes  the answers that count, separated by spaces (e.g. "200 404")
eag_out=
eag_rc=
eag_ok=
if [ -n "${els-}" ]; then
  eag_rc=127
  [ -x "$HOME/${eag_probe?}" ] && {
    eag_out=$("$HOME/$eag_probe" --api "$els" "${eag_path?}" 2>/dev/null)
    eag_rc=$?
  }
  if [ "$eag_rc" = 0 ]; then
    # The probe's last line is "@api=CODE": a JSON body escapes its newlines.
    for eag_c in ${eag_codes?}; do
      case $eag_out in *"
@api=$eag_c") eag_ok=1 ;; esac
    done
  fi
fi
