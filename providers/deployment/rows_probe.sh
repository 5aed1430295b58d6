#!/bin/sh
# A serve's probe when its recipe names {rows:TENSOR} (row_probe.h): the
# container probe, then the safetensors headers of the snapshot the serve
# binds, framed so that ParseRowsProbe can split them:
#   <the container probe's output>
#   @@rows-headers
#   <snapshot_headers.sh's stream>
#   @@rows-headers-end=<its exit status: 0, 3 without the snapshot>
# Each runs in a subshell of its own: one's `exit` or `cd` does not end or
# move the other, and the header read's errors stay off the probe's stderr.
# Embedded in fleet at build time (kRowsProbeScript) and run inside the
# caller's shell after one assignment per value (quoted once by fleet):
#   rp_container  the container probe (sh)
#   rp_headers    the header read (sh: SnapshotHeadersScript)
(eval "${rp_container?}")
printf '@@rows-headers\n'
(eval "${rp_headers?}") 2>/dev/null
printf '\n@@rows-headers-end=%s\n' "$?"
