#!/bin/sh
# The node's images as its container CLI lists them, for the node facts
# probe: "images=HOW RC" (HOW: inspect when the rows below are the
# inspect's, ls when the listing failed and they are its error; RC the CLI's
# exit status) and one "image_out=ROW" line per row (podman's repeated for
# each tag); "images=cli-missing" without the CLI. Embedded in fleet at
# build time (kImageListingScript) and run inside the probe's own shell (the body of its `ell` function), after
# `ilc=CLI` (quoted once by fleet): no process more than the CLI's.
# GOGC=400 is the provider's kListingCliEnv (image_listing.h says why): a Go
# CLI's collector need not run over a listing that ends at once.
if ! command -v "${ilc?}" >/dev/null 2>&1; then
  echo images=cli-missing
else
  case ${ilc##*/} in
    podman)
      # podman's `image ls` takes the inspect's template (its rows carry the
      # image's RepoDigests and RepoTags, one row per tag): one CLI start,
      # not two, on every node of every plan. Other CLIs' do not.
      ilo=$(GOGC=400 "$ilc" image ls --no-trunc --format \
        'img {{.ID}} {{json .RepoDigests}} {{json .RepoTags}}' 2>&1)
      ilr=$?
      # Its rows repeat (one per tag): the controller drops the repeats
      # (ParseImageListing), not an awk here.
      if [ "$ilr" = 0 ]; then
        ili=inspect
      else
        ili='ls'
      fi
      ;;
    *)
      ilo=$(GOGC=400 "$ilc" image ls -q --no-trunc 2>&1)
      ilr=$?
      # The IDs are checked to be hex before they reach the inspect as words.
      ili=$(printf '%s\n' "$ilo" | awk '/^(sha256:)?[0-9a-f]+$/ && !seen[$0]++')
      if [ "$ilr" = 0 ] && [ -n "$ili" ]; then
        # shellcheck disable=SC2086 # $ili: hex IDs, one word each
        ilo=$(GOGC=400 "$ilc" image inspect --format \
          'img {{.Id}} {{json .RepoDigests}} {{json .RepoTags}}' $ili 2>&1)
        ilr=$?
        ili=inspect
      elif [ "$ilr" = 0 ]; then
        ilo=''
        ili=inspect
      else
        ili='ls'
      fi
      ;;
  esac
  printf 'images=%s %s\n' "$ili" "$ilr"
  if [ "$ilr" != 0 ]; then
    # An error's message, blank lines and all (rare: a sed may run).
    [ -z "$ilo" ] || printf '%s\n' "$ilo" | sed 's/^/image_out=/'
  elif [ -n "$ilo" ]; then
    # The rows, by the shell itself: a sed was a process more on every
    # node of every plan. Split at newlines only, no line taken for a
    # file pattern; a listing's blank lines say nothing.
    set -f
    ilf=$IFS
    IFS='
'
    for l in $ilo; do printf 'image_out=%s\n' "$l"; done
    IFS=$ilf
    set +f
  fi
fi
