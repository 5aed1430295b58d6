#!/usr/bin/env bash
# Configures (once) and builds fleet into ./build.
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ ! -f build/build.ninja ]]; then
  meson setup build --buildtype=debugoptimized >/dev/null
fi
ninja -C build
