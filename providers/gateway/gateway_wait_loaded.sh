#!/bin/sh
# Waits until the gateway answers with the config fleet just wrote: exit 0
# then. Exit 3 after 150 tries 0.2 s apart (~30 s), printing what it
# answered ("nothing" when it did not), or at once, printing "the container
# is STATE" (or "gone"), when its container stops running.
# Embedded in fleet at build time (kGatewayWaitLoadedScript) and run after
# gateway_loaded.sh (gw_loaded) and one assignment a value, quoted once by
# fleet:
#   gwl_cli        the container CLI
#   gwl_container  the gateway's container
#   gwl_url        its /health URL
#   gwl_header     the header naming the config it loaded
#   gwl_config     the config it must name
i=0
while :; do
  h=$(gw_loaded "${gwl_url?}" "${gwl_header?}")
  [ "$h" = "${gwl_config?}" ] && exit 0
  i=$((i + 1))
  if [ $i -ge 150 ]; then
    echo "${h:-nothing}"
    exit 3
  fi
  s=$("${gwl_cli?}" container inspect --format '{{.State.Status}}' "${gwl_container?}" 2>/dev/null)
  [ "$s" = running ] || { echo "the container is ${s:-gone}"; exit 3; }
  sleep 0.2
done
