#!/bin/sh
# The target's side of a copy through a stream: makes the folders, starts
# the .incomplete file afresh when the copy starts at byte 0 (else appends
# to what a cut-short copy left), and appends its stdin to it.
# Embedded in fleet at build time (kCopyWriterScript) and run on the target
# after TargetPrelude ($m the repo folder) and one assignment a value
# (quoted once by fleet; cw_inc may spell the path with $m):
#   cw_inc    the .incomplete file
#   cw_fresh  1: the copy starts at byte 0; 0: it resumes
mkdir -p -- "${m?}/blobs" "$(dirname -- "${cw_inc?}")" || exit 1
if [ "${cw_fresh?}" = 1 ]; then
  : >"$cw_inc" || exit 1
fi
exec cat >>"$cw_inc"
