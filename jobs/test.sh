#!/usr/bin/env bash
# The README's test command: install what is needed, build, run every test.
set -euo pipefail
cd "$(dirname "$0")/.."
t0=$(date +%s)
bash jobs/setup.sh
bash jobs/build.sh
t1=$(date +%s)
echo "test.sh: set-up and build took $((t1 - t0)) s"
source jobs/env.sh  # sets OMP_NUM_THREADS=1, which plain `nproc` obeys: hence nproc --all
ctest --test-dir build --output-on-failure -j "$(nproc --all)" --timeout 900
echo "test.sh: tests took $(( $(date +%s) - t1 )) s"
# The same build again with LibTorch restricted as on CPUs without native bf16.
bash jobs/lanes/avx2.sh
# Extra lanes (each prints `lane NAME: N s`).
bash jobs/lanes/mpich.sh   # MPICH build (build-mpich), MPI-labelled tests at 2 and 3 ranks
t2=$(date +%s)
# libFuzzer targets (clang, own build directory): each runs 20 s on its seed
# corpus in tests/fuzz/corpus (VITKD_FUZZ_SECONDS changes that).
cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=Release -DVITKD_FUZZ=ON \
  -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ -DVITKD_FUZZ_SECONDS="${VITKD_FUZZ_SECONDS:-20}"
cmake --build build-fuzz -j "$(nproc --all)"
ctest --test-dir build-fuzz --output-on-failure -j "$(nproc --all)" -L fuzz
echo "test.sh: fuzz build and runs took $(( $(date +%s) - t2 )) s"
