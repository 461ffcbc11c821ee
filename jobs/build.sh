#!/usr/bin/env bash
# Configure and build vitkd (Release) into ./build. Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release ${CMAKE_ARGS:-}
cmake --build build -j "$(nproc)"
