#!/bin/sh
# Defines gw_loaded URL HEADER: prints the value of the response header
# HEADER (lowercase) of GET URL (the gateway's own /health), or nothing.
# /health, which a gateway with keys answers without one: fleet's probe
# holds no key, and a key on a node's command line would be in its ps.
# curl where the node has it, else wget; 3 s, no proxy (the URL is the
# node's own loopback).
# Embedded in fleet at build time (kGatewayLoadedScript) and put before the
# scripts that call it (gateway_probe.sh, gateway_wait_loaded.sh).
gw_loaded() {
  if command -v curl >/dev/null 2>&1; then
    curl -s -g --noproxy '*' --max-time 3 -D - -o /dev/null "$1" 2>&1
  else
    wget -S -q -t 1 -T 3 -O /dev/null "$1" 2>&1
  fi | tr -d '\r' | awk -v h="$2:" 'tolower($1) == h { print $2; exit }'
}
