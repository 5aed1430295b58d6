#!/bin/sh
# Moves a serve's container aside while its replacement starts, or back:
#   swc_how=aside  stops swc_from (30 s grace) and renames it swc_to
#   swc_how=back   renames swc_from back to swc_to and starts it
# Exit status: the first command's that failed, else 0.
# Embedded in fleet at build time (kSwapContainerScript) and run after one
# assignment a value, swc_how, swc_cli, swc_from, swc_to (quoted once by
# fleet).
case ${swc_how?} in
  aside)
    "${swc_cli?}" stop -t 30 "${swc_from?}" >/dev/null &&
      "$swc_cli" rename "$swc_from" "${swc_to?}"
    ;;
  back)
    "${swc_cli?}" rename "${swc_from?}" "${swc_to?}" &&
      "$swc_cli" start "$swc_to" >/dev/null
    ;;
  *)
    echo "swap_container.sh: no way $swc_how" >&2
    exit 2
    ;;
esac
