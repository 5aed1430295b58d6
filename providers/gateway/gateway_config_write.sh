#!/bin/sh
# Writes the gateway's HAProxy config on its node, whole or not at all: into
# .haproxy.cfg.new beside it, renamed over haproxy.cfg (HAProxy, reloading,
# never reads half a file). World-readable: the container's HAProxy reads it
# as its own user.
# Embedded in fleet at build time (kGatewayConfigWriteScript) and run after
# one assignment a value (quoted once by fleet; gcw_dir may start from
# $HOME):
#   gcw_dir     the gateway's config folder
#   gcw_config  the config's text
umask 022 &&
  mkdir -p -- "${gcw_dir?}" &&
  printf '%s' "${gcw_config?}" >"$gcw_dir/.haproxy.cfg.new" &&
  mv -f -- "$gcw_dir/.haproxy.cfg.new" "$gcw_dir/haproxy.cfg"
