#!/usr/bin/env bash
# Build libpagealloc (optimised, with debug info) into build/ and run the
# page-heap demo. Installs missing Debian packages first (needs root for that).
set -euo pipefail
cd "$(dirname "$0")/.."

tools/setup-deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo
cmake --build build -j "$(nproc)" --target pa-demo
build/pa-demo
