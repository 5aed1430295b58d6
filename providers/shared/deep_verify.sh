#!/bin/sh
# Deep verify's hashing on the node: one line "<hex>  <path>" or
# "<hex> *<path>" per file on stdout; on stderr, the sha256 hasher
# ("fleet-hasher NAME"), the files at once and the shell's `times` (its
# second line is the CPU of every process it waited for, the hashers
# included), so the report can say what the hashing cost the node.
# Embedded in fleet at build time (kDeepVerifyScript) and run by the
# channel's own shell, after one assignment per value and `set --` with the
# files, all quoted once by fleet:
#   c, d, r  the hub cache, the repo's folder name, the revision
#   probe    the installed fleet-probe, from $HOME
#   choose   sh (blob_hash.h's kChooseSha256Cli, eval'd): sets $sha256
#   "$@"     PARALLEL (0: the node's cores), NGIT, then NGIT paths hashed as
#            git blobs (sha1 of "blob <size>\0" + content), then the paths
#            hashed with sha256, all relative to the snapshot
m="${c?}/${d?}"
[ -d "$m" ] || m="$c/../$d"
cd -- "$m/snapshots/${r?}" 2>/dev/null || {
  echo "no snapshot $r" >&2
  exit 3
}
par=$1
ngit=$2
shift 2
p=$par
[ "$p" -gt 0 ] || p=$(nproc 2>/dev/null) || p=4

# The small git blobs in the background, beside the sha256 ones: their few
# processes each (~15 ms for 3 files) no longer delay the big files.
if [ "$ngit" -gt 0 ]; then
  {
    command -v sha1sum >/dev/null || {
      echo 'sha1sum not found on the node' >&2
      exit 127
    }
    i=0
    for f; do
      i=$((i + 1))
      [ "$i" -le "$ngit" ] || break
      s=$(wc -c <"$f") && h=$({
        printf 'blob %s\000' "$s"
        cat -- "$f"
      } | sha1sum) && printf '%s  %s\n' "${h%% *}" "$f"
    done
  } &
  git_hashes=$!
fi
shift "$ngit"

# The sha256 blobs, $p at a time. The hasher: fleet-probe --sha256 where
# the installed probe has that mode and libcrypto loads (it maps the files
# instead of copying them out of the page cache: ~0.9 of `openssl speed`'s
# per-core rate per CPU-second, `openssl dgst` ~0.8); else OpenSSL's CLI
# (the CPU's SHA extensions: several times coreutils' sha256sum where both
# exist); else sha256sum.
if [ $# -gt 0 ]; then
  fp="$HOME/${probe?}"
  [ -x "$fp" ] || fp=$(command -v fleet-probe 2>/dev/null)
  sha256=
  eval "${choose?}"
  if [ -n "$fp" ] && [ -x "$fp" ] && "$fp" --sha256 </dev/null >/dev/null 2>&1; then
    hasher=fleet-probe
  elif command -v "${sha256%% *}" >/dev/null 2>&1; then
    hasher=${sha256% -sha256 -r}
  else
    echo 'neither openssl nor sha256sum on the node' >&2
    exit 127
  fi
  echo "fleet-hasher $hasher" >&2
  # fleet-probe: a thread per core; it keeps them all busy to the end
  # itself (the last files in steps, the one with the most left first), so
  # that 3 shards on 2 cores take 1.5 shards' time. Other hashers (a
  # process per file), up to four files per core: all at once, for the
  # kernel to share the cores likewise. More: one per core, largest first.
  if [ "$par" -le 0 ]; then
    [ "$hasher" = fleet-probe ] || [ $# -gt $((4 * p)) ] || p=$#
  fi
  [ "$p" -le $# ] || p=$#
  # Paths go as ./path so that none reads as an option.
  # shellcheck disable=SC2086 # $sha256 splits into its words
  printf './%s\0' "$@" | if [ "$hasher" = fleet-probe ]; then
    xargs -0 "$fp" --sha256 --threads "$p"
  else
    xargs -0 -n 1 -P "$p" $sha256
  fi || exit $?
fi
if [ "$ngit" -gt 0 ]; then wait "$git_hashes" || exit $?; fi
echo "fleet-hash-times $p" >&2
times >&2
