#!/bin/sh
# shellcheck disable=SC2034 # $m and $r are read by the script after this one
# A model repo's folder in a hub cache, as $m: $c/$d in the hub layout,
# else $c/../$d (the legacy layout keeps repo folders beside the cache;
# legacy_layout_link.sh links one in). The script that follows reads $m and
# the revision $r.
# Embedded in fleet at build time (kRepoFolderScript) and run after
# `c=CACHE d=REPO_FOLDER_NAME r=REVISION` (quoted once by fleet), in the
# caller's shell.
m="${c?}/${d?}"
[ -d "$m" ] || m="$c/../$d"
