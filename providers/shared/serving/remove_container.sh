#!/bin/sh
# Stops (30 s grace) and removes a container; docker and podman alike. One
# that is not there is not an error (the words both engines use for it are
# deployment_probe.h's kNoSuchContainerPattern, written out here: a case
# pattern with | cannot come from a variable); an engine that cannot say
# (its daemon down, its storage broken) is: exit 1, its words on stderr.
# Embedded in fleet at build time (kRemoveContainerScript) and run after
# `rmc_cli=CLI rmc_name=CONTAINER` (quoted once by fleet).
if rmc_err=$("${rmc_cli?}" container inspect "${rmc_name?}" 2>&1 >/dev/null); then
  "$rmc_cli" stop -t 30 "$rmc_name" >/dev/null 2>&1
  "$rmc_cli" rm -f "$rmc_name" >/dev/null
else
  case $rmc_err in
    *[Nn]'o such container'*|*'container not known'*) ;;
    *)
      printf '%s\n' "$rmc_err" >&2
      exit 1
      ;;
  esac
fi
