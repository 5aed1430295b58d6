#!/usr/bin/env bash
# Configures (once) and builds fleet into ./build: -O2 without debug info
# (-g makes each test's translation unit a third slower to compile and CI
# builds them all from scratch; asserts stay on). For a debugger:
#   meson configure build -Ddebug=true
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ ! -f build/build.ninja ]]; then
  meson setup build -Doptimization=2 -Ddebug=false >/dev/null
fi
ninja -C build
