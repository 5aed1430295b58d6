#!/bin/sh
# Turns a snapshot's absolute links into relative ones: for each PATH REL
# pair, links $m/snapshots/$r/PATH to REL (../../blobs/BLOB, one ../ more
# per folder of PATH), but only when REL resolves from there: the blob must
# really be this repo's. Always exits 0.
# Embedded in fleet at build time (kRelativeLinksScript) and run after
# RepoPrelude ($m the repo folder, $r the revision) and
# `set -- PATH REL [PATH REL]...` (each quoted once by fleet).
while [ $# -ge 2 ]; do
  f="${m?}/snapshots/${r?}/$1"
  [ -f "$(dirname -- "$f")/$2" ] && ln -sfn -- "$2" "$f"
  shift 2
done
exit 0
