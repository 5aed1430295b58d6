#!/bin/sh
# The safetensors headers of a revision's snapshot, read on the node, as one
# framed stream (ParseHeaderStream reads it):
#   I<TAB>SIZE<TAB>PATH, then the SIZE bytes of a *.safetensors.index.json
#   H<TAB>SIZE<TAB>HEX8<TAB>FOLLOW<TAB>PATH, then FOLLOW bytes: a
#     *.safetensors file's first 8 bytes (HEX8, the header's length,
#     little-endian) and its header, when that length is at most $shs_max
#     and fits in the file (FOLLOW 0 otherwise)
# Exits 3 with "no snapshot REV" on stderr when the snapshot is absent.
# Embedded in fleet at build time (kSnapshotHeadersScript) and run after
# RepoPrelude ($m the repo folder, $r the revision) and `shs_max=BYTES`.
cd -- "${m?}/snapshots/${r?}" 2>/dev/null || { echo "no snapshot $r" >&2; exit 3; }
T=$(printf '\t')
find -L . -type f \( -name '*.safetensors' -o -name '*.safetensors.index.json' \) -printf '%s\t%P\n' |
while IFS="$T" read -r sz f; do
  case $f in
    *.safetensors.index.json) printf 'I\t%s\t%s\n' "$sz" "$f"; head -c "$sz" -- "$f";;
    *)
      # od's words are the 8 bytes, one each: split on purpose.
      # shellcheck disable=SC2046
      set -- $(od -An -tx1 -N8 -- "$f" 2>/dev/null)
      h=$1$2$3$4$5$6$7$8; k=0
      if [ $# -eq 8 ] && [ "$8$7$6$5" = 00000000 ]; then
        n=$((0x$4$3$2$1))
        if [ "$n" -le "${shs_max?}" ] && [ "$n" -le $((sz - 8)) ]; then k=$n; fi
      fi
      printf 'H\t%s\t%s\t%s\t%s\n' "$sz" "$h" "$k" "$f"
      if [ "$k" -gt 0 ]; then tail -c +9 -- "$f" | head -c "$k"; fi;;
  esac
done
