#!/bin/sh
# Removes a revision from a hub cache: its snapshot, the blobs no other
# snapshot links to (and their .incomplete leftovers), its staged mark, the
# refs naming it; the repo folder too when no snapshot is left (through a
# legacy-layout link: the folder it points at, then the link). Prints
# "freed BYTES" (the blobs' bytes); "freed 0" when the snapshot is absent.
# Embedded in fleet at build time (kRemoveRevisionScript) and run after
# RepoPrelude ($c the cache, $d the repo folder's name, $r the revision,
# $m the repo folder).
s="${m?}/snapshots/${r?}"
[ -d "$s" ] || { echo freed 0; exit 0; }
k=$(mktemp) || exit 1
trap 'rm -f "$k"' EXIT
# Blobs another snapshot links to stay.
for o in "$m"/snapshots/*; do
  [ -d "$o" ] && [ "$o" != "$s" ] && find "$o" -type l -printf '%l\n'
done | sed 's,.*/,,' | sort -u >"$k"
n=0
# Blob names are hex words: the listing splits into them.
for b in $(find "$s" -type l -printf '%l\n' | sed 's,.*/,,' | sort -u | grep -vxF -f "$k"); do
  for f in "$m/blobs/$b" "$m/blobs/$b.incomplete"; do
    [ -f "$f" ] && n=$((n + $(wc -c <"$f"))) && rm -f -- "$f"
  done
done
rm -rf -- "$s" || exit 1
rm -f -- "$m/.fleet-staged/$r"
rmdir -- "$m/.fleet-staged" 2>/dev/null
find "$m/refs" -type f 2>/dev/null | while IFS= read -r f; do
  v=
  IFS= read -r v <"$f" || :
  [ "$v" = "$r" ] && rm -f -- "$f"
done
if [ -z "$(ls -A "$m/snapshots" 2>/dev/null)" ]; then
  # Through a legacy-layout link: remove the folder it points at, then it.
  [ -L "${c?}/${d?}" ] && { rm -rf -- "$(cd "$c/$d" && pwd -P)"; rm -f -- "$c/$d"; }
  rm -rf -- "$m"
fi
echo "freed $n"
