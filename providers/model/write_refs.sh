#!/bin/sh
# Writes refs of a repo: for each NAME COMMIT pair, $m/refs/NAME holds
# COMMIT (no newline, as the Hub writes them), its folder made. With
# wr_swap=1 each goes through NAME.fleet-tmp renamed over it, so that a
# tool reading the ref never sees it half-written (the branch a serve
# loads). Exit 1 at the first that fails.
# Embedded in fleet at build time (kWriteRefsScript) and run after a
# prelude setting $m (the repo folder), `wr_swap=0|1` and
# `set -- NAME COMMIT [NAME COMMIT]...` (each quoted once by fleet).
while [ $# -ge 2 ]; do
  f="${m?}/refs/$1"
  mkdir -p -- "$(dirname -- "$f")" || exit 1
  if [ "${wr_swap?}" = 1 ]; then
    printf '%s' "$2" >"$f.fleet-tmp" && mv -f -- "$f.fleet-tmp" "$f" || exit 1
  else
    printf '%s' "$2" >"$f" || exit 1
  fi
  shift 2
done
