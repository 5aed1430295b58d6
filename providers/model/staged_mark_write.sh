#!/bin/sh
# Writes the mark of a revision fleet staged (staged_mark.h): the file
# <repo folder>/.fleet-staged/<commit>, "staged by fleet: REPO@COMMIT".
# Idempotent: an existing mark is left as it is. In the hub layout's folder
# when there is no repo folder yet (a first download makes that one).
# Embedded in fleet at build time (kStagedMarkWriteScript) and run after
# RepoPrelude ($c the cache, $d the repo folder's name, $r the commit, $m
# the repo folder) and `smw_repo=ORG/NAME` (quoted once by fleet).
[ -d "${m?}" ] || m="${c?}/${d?}"
[ -f "$m/.fleet-staged/${r?}" ] && exit 0
mkdir -p -- "$m/.fleet-staged" &&
  printf 'staged by fleet: %s@%s\n' "${smw_repo?}" "$r" >"$m/.fleet-staged/$r"
