#!/bin/sh
# A hop's writer of a whole file that hashes the bytes as it writes them, so
# that the check overlaps the stream instead of re-reading the file after
# it: it makes the folders, stdin goes to the .incomplete file, and stdout
# is the hash line of what arrived (`openssl dgst -sha256 -r`'s, or
# sha256sum's where the node has no openssl; sha1sum's of git's blob header
# and the data). A file without a blob name (hw_kind none) is written as it
# comes, and nothing is printed.
# Embedded in fleet at build time (kHashingWriterScript) and run on the
# target after TargetPrelude and one assignment a value (quoted once by
# fleet; hw_inc may spell the path with $m):
#   hw_kind    sha256, git-sha1 or none
#   hw_inc     the .incomplete file
#   hw_size    the file's size in bytes (git's hash covers it)
#   hw_choose  sh (blob_hash.h's kChooseSha256Cli, eval'd): sets $sha256
mkdir -p -- "${m?}/blobs" "$(dirname -- "${hw_inc?}")" || exit 1
case ${hw_kind?} in
  sha256)
    sha256=
    eval "${hw_choose?}"
    # $sha256 is a command and its options ("openssl dgst -sha256 -r"):
    # split on purpose.
    # shellcheck disable=SC2086
    tee -- "$hw_inc" | $sha256
    ;;
  git-sha1)
    { printf 'blob %s\000' "${hw_size?}"; tee -- "$hw_inc"; } | sha1sum
    ;;
  *)
    exec cat >"$hw_inc"
    ;;
esac
