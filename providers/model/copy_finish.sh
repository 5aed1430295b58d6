#!/bin/sh
# Finishes a copied file: checks its size, renames the .incomplete file to
# its final name and, for a blob, links the snapshot's path to it. Exits 1
# with "size S after the copy, expected N" on stderr when the size is off.
# Embedded in fleet at build time (kCopyFinishScript) and run on the target
# after TargetPrelude (and, over the fabric, copy_verify.sh) and one
# assignment a value (quoted once by fleet; paths may be spelt with $m):
#   cf_inc    the .incomplete file
#   cf_final  its final name (the blob, or the snapshot's file)
#   cf_size   the size it must have, in bytes
#   cf_link   the snapshot's path to link to the blob; "" for none
#   cf_rel    the link's target, relative to the link's folder
s=$(wc -c <"${cf_inc?}") || exit 1
[ "$s" = "${cf_size?}" ] || { echo "size $s after the copy, expected $cf_size" >&2; exit 1; }
mv -f -- "$cf_inc" "${cf_final?}" || exit 1
if [ -n "${cf_link?}" ]; then
  mkdir -p -- "$(dirname -- "$cf_link")" && ln -sfn -- "${cf_rel?}" "$cf_link"
fi
