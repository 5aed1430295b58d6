#!/usr/bin/env bash
# Prints a help2man include file whose COMMANDS section holds the help of
# every command and subcommand of FLEET (`fleet CMD --help`), so that
# fleet(1) documents them all, not only the top-level help.
#   scripts/man_commands.sh FLEET > commands.h2m
set -euo pipefail
fleet=$1

# subcommands HELP-TEXT: the names listed under its "Subcommands:" line.
subcommands() {
  awk '/^Subcommands:/ {on = 1; next} on && /^  [a-z]/ {print $1} on && /^$/ {on = 0}' <<<"$1"
}

# roff_literal: help text as roff in no-fill mode (backslashes escaped, a
# line starting with . or ' kept as text).
roff_literal() { sed -e 's/\\/\\e/g' -e "s/^\([.']\)/\\\\\&\1/"; }

section() {  # section CMD...: the help of `fleet CMD...`, then its subcommands'
  local help sub
  help=$("$fleet" "$@" --help)
  printf '.SS "fleet %s"\n.nf\n' "$*"
  roff_literal <<<"$help"
  printf '.fi\n'
  for sub in $(subcommands "$help"); do section "$@" "$sub"; done
}

echo '[COMMANDS]'
for cmd in $(subcommands "$("$fleet" --help)"); do
  [[ $cmd == help ]] || section "$cmd"
done
