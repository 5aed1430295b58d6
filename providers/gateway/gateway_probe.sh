#!/bin/sh
# The gateway on its node, for the plan (ParseGatewayProbe reads it):
# "cli=missing", or "container=STATE SPEC" when its container exists; the
# "# fleet-..." lines of the config fleet wrote; "loaded=CONFIG", the config
# HAProxy answers with (empty when it does not answer).
# Embedded in fleet at build time (kGatewayProbeScript) and run after
# gateway_loaded.sh (gw_loaded) and one assignment a value, quoted once by
# fleet (gwp_dir may spell the folder with $HOME):
#   gwp_cli        the container CLI
#   gwp_container  the gateway's container
#   gwp_format     the inspect's --format: its state and spec label
#   gwp_dir        the gateway's config folder
#   gwp_url        its /health URL
#   gwp_header     the header naming the config it loaded
if ! command -v "${gwp_cli?}" >/dev/null 2>&1; then
  echo cli=missing
elif c=$("$gwp_cli" container inspect --format "${gwp_format?}" "${gwp_container?}" 2>/dev/null); then
  echo "container=$c"
fi
grep '^# fleet-' "${gwp_dir?}/haproxy.cfg" 2>/dev/null
echo "loaded=$(gw_loaded "${gwp_url?}" "${gwp_header?}")"
