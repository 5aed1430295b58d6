#!/bin/sh
# Checks a copied file before it takes its blob's name: it must hash to
# that name (sha256 for an LFS blob, git's sha1 of "blob SIZE\0" + bytes for
# a git blob). A mismatch removes the partial file and exits 1 with
# "hashes to H, not its blob name; ..." on stderr.
# Embedded in fleet at build time (kCopyVerifyScript) and run on the target
# after TargetPrelude and one assignment a value (quoted once by fleet;
# cv_inc may spell the path with $m):
#   cv_kind    sha256 or git-sha1
#   cv_inc     the .incomplete file
#   cv_size    its size in bytes (git's hash covers it)
#   cv_blob    the blob name it must hash to
#   cv_choose  sh (blob_hash.h's kChooseSha256Cli, eval'd): sets $sha256
case ${cv_kind?} in
  sha256)
    sha256=
    eval "${cv_choose?}"
    # $sha256 is a command and its options ("openssl dgst -sha256 -r"):
    # split on purpose.
    # shellcheck disable=SC2086
    h=$($sha256 <"${cv_inc?}") || exit 1
    ;;
  git-sha1)
    h=$({ printf 'blob %s\000' "${cv_size?}"; cat <"${cv_inc?}"; } | sha1sum) || exit 1
    ;;
  *)
    echo "no hash kind $cv_kind" >&2
    exit 2
    ;;
esac
h=${h%% *}
[ "$h" = "${cv_blob?}" ] || {
  rm -f -- "$cv_inc"
  echo "hashes to $h, not its blob name; the partial file is removed" >&2
  exit 1
}
