#!/bin/sh
# A floating image ref on the node, for the image's probe fragment: one line
# "ref <exit status> <output>" of `CLI image inspect --format FORMAT REF`,
# its output's newlines turned into spaces (2>&1 keeps the reason of a miss;
# ParseImageProbe skips the warnings a CLI prints around the answer), or
# "cli missing" when the CLI is not on PATH.
# Embedded in fleet at build time (kImageProbeScript) and run inside the
# probe's own shell (which it leaves running: no exit), after one
# assignment a value, quoted once by fleet:
#   ipr_cli     the container CLI (docker or podman)
#   ipr_format  inspect's --format (kInspectFormat)
#   ipr_ref     the ref to look up (ImageRef::Lookup)
if ! command -v "${ipr_cli?}" >/dev/null 2>&1; then
  echo 'cli missing'
else
  ipr_out=$("$ipr_cli" image inspect --format "${ipr_format?}" "${ipr_ref?}" 2>&1)
  ipr_rc=$?
  printf 'ref %s %s\n' "$ipr_rc" "$(printf '%s' "$ipr_out" | tr '\n' ' ')"
fi
