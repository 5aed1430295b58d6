#!/bin/sh
# Links a repo folder of the legacy layout (beside the cache: $c/../$d) into
# the cache ($c/$d -> ../$d), where the hub layout looks for it. Idempotent:
# exit 0 when the link is already there. Exit 1, saying why on stderr, when
# there is no legacy folder or $c/$d is something else (left as it is).
# Embedded in fleet at build time (kLegacyLayoutLinkScript) and run after
# `c=CACHE d=REPO_FOLDER_NAME` (quoted once by fleet).
[ -d "${c?}/../${d?}" ] || { echo "no legacy folder $c/../$d" >&2; exit 1; }
if [ -L "$c/$d" ]; then
  [ "$(readlink -- "$c/$d")" = "../$d" ] && exit 0
  echo "$c/$d is a symlink to $(readlink -- "$c/$d"), not ../$d; left as is" >&2
  exit 1
fi
[ -e "$c/$d" ] && { echo "$c/$d exists and is not a symlink; left as is" >&2; exit 1; }
mkdir -p -- "$c" && ln -s -- "../$d" "$c/$d"
