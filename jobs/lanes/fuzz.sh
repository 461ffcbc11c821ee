#!/usr/bin/env bash
# The fuzzing lane of jobs/test.sh: the libFuzzer targets of tests/fuzz (clang,
# AddressSanitizer + UBSan, their own build folder build-fuzz), each run for
# VITKD_FUZZ_SECONDS (20 by default) on its seed corpus in tests/fuzz/corpus.
set -euo pipefail
cd "$(dirname "$0")/../.."
cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=Release -DVITKD_FUZZ=ON \
  -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ -DVITKD_FUZZ_SECONDS="${VITKD_FUZZ_SECONDS:-20}"
cmake --build build-fuzz -j "$(nproc --all)"
ctest --test-dir build-fuzz --output-on-failure -j "$(nproc --all)" -L fuzz
