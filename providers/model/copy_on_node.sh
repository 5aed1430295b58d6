#!/bin/sh
# A copy between two folders one node sees (a store it mounts and its own
# cache): the source's file into the target's .incomplete file, whole, or
# from byte cn_offset on, appended to what a cut-short copy left. Exit 1
# when it fails.
# Embedded in fleet at build time (kCopyOnNodeScript) and run after the
# source's and the target's preludes ($m the target's repo folder) and one
# assignment a value (quoted once by fleet; the paths may use $ms and $m):
#   cn_from    the source's file
#   cn_inc     the target's .incomplete file
#   cn_offset  the bytes already there (0: copy it whole)
mkdir -p -- "${m?}/blobs" "$(dirname -- "${cn_inc?}")" || exit 1
if [ "${cn_offset?}" = 0 ]; then
  cp -- "${cn_from?}" "$cn_inc" || exit 1
else
  tail -c +$((cn_offset + 1)) -- "$cn_from" >>"$cn_inc" || exit 1
fi
