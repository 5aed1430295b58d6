#!/bin/sh
# The running fleet serves (containers labelled fleet.deployment) on the
# node, after the engine API's read (ServingContainersCommand): the API's
# answer, a "serving_api=" line each of its lines, where it gave one
# (ParseServingContainers reads the names from its JSON); else the CLI's
# listing, "serving=NAME" lines, with the CLI's exit status.
# GOGC=400 is engine_api.h's kListingCliEnv (it says why): a Go CLI's
# collector need not run over a listing that ends at once.
# Embedded in fleet at build time (kServingContainersScript) and run in the
# caller's shell after ProbeApiGetScript's read (it sets $sv_out, and
# $sv_api to 1 when the API answered 200) and one assignment a value,
# quoted once by fleet:
#   svc_cli    the container CLI (docker or podman)
#   svc_label  the label the serves carry (fleet.deployment)
if [ -n "${sv_api-}" ]; then
  # Each line prefixed in this shell: no `printf | while read` pipeline
  # and its two forks.
  svc_body=${sv_out?}
  svc_body=${svc_body%"
@api=200"}
  while :; do
    case $svc_body in
      *"
"*)
        printf 'serving_api=%s\n' "${svc_body%%"
"*}"
        svc_body=${svc_body#*"
"}
        ;;
      *)
        printf 'serving_api=%s\n' "$svc_body"
        break
        ;;
    esac
  done
else
  GOGC=400 "${svc_cli?}" ps --filter "label=${svc_label?}" --format 'serving={{.Names}}'
fi
