#!/bin/sh
# The bytes of a repo's finished and partial blobs, one number: what a
# running download has written so far (its tool's own progress goes to its
# log). Both layouts' folders are read: the download may make either.
# Embedded in fleet at build time (kBlobBytesScript) and run after
# RepoPrelude ($c the cache, $d the repo folder's name).
find "${c?}/${d?}/blobs" "$c/../$d/blobs" -maxdepth 1 -type f -printf '%s\n' 2>/dev/null |
  awk '{ s += $1 } END { print s + 0 }'
