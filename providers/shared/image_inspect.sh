#!/bin/sh
# The tail of an image's inspect (ImageInspectScript): the engine API's
# answer where it gave one, else the CLI's. Prints "image_api=" and the
# API's answer whole (ParseImageInspect reads it to its "@api=" line), or
# what `CLI image inspect --format FORMAT WHAT 2>&1` prints, with the CLI's
# exit status.
# Embedded in fleet at build time (kImageInspectScript) and run in the
# caller's shell after ProbeApiGetScript's read (it sets $iio, and $ii to 1
# when the API answered for the image) and one assignment a value, quoted
# once by fleet:
#   iin_cli     the container CLI (docker or podman)
#   iin_format  inspect's --format (kInspectFormat)
#   iin_what    the image's name or ID
if [ -n "${ii-}" ]; then
  printf 'image_api=%s\n' "${iio-}"
else
  "${iin_cli?}" image inspect --format "${iin_format?}" "${iin_what?}" 2>&1
fi
