#!/bin/sh
# A chain's forward payload: the SOURCE_CMD (eval'd by fabric_send.sh) of a
# middle hop's send to the next hop. It sends tee's copy of the stream into
# this hop (fd 3), then waits for that stream's verdict: $up is the hop's
# listener dir (fabric_listen.sh), where its s_server's exit status (rc) and
# stderr (err) land once it ended. Not clean: this command fails, so the
# send script cuts the forward without close_notify.
# Embedded in fleet at build time (kFabricForwardScript).
cat <&3 || exit 1
i=0
until [ -e "${up?}/rc" ]; do
  i=$((i + 1))
  [ $i -lt 600 ] || exit 1
  sleep 0.05
done
if [ "$(cat "$up/rc")" != 0 ] || grep -qv SSL_get_servername "$up/err"; then
  echo 'the stream into this hop did not end cleanly' >&2
  exit 1
fi
