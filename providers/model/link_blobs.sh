#!/bin/sh
# Links snapshot paths to blobs the repo already holds (another revision
# brought them): for each PATH REL pair, $m/snapshots/$r/PATH becomes a
# link to REL (../../blobs/BLOB, one ../ more per folder of PATH), its
# folder made. Exit 1 at the first that fails.
# Embedded in fleet at build time (kLinkBlobsScript) and run after
# TargetPrelude ($m the repo folder, $r the revision) and
# `set -- PATH REL [PATH REL]...` (each quoted once by fleet).
while [ $# -ge 2 ]; do
  f="${m?}/snapshots/${r?}/$1"
  mkdir -p -- "$(dirname -- "$f")" && ln -sfn -- "$2" "$f" || exit 1
  shift 2
done
