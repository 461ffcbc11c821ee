#!/usr/bin/env bash
# The whole test suite built and run under AddressSanitizer + UBSan, in its
# own build directory (build-asan, -DVITKD_SANITIZE=ON). Slower than
# jobs/test.sh (build about 3x, tests about 2-3x), so not part of it.
# Works from a fresh clone: installs what is needed first.
set -euo pipefail
cd "$(dirname "$0")/.."
t0=$(date +%s)
bash jobs/setup.sh
cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DVITKD_SANITIZE=ON
cmake --build build-asan -j "$(nproc)"
t1=$(date +%s)
echo "test-sanitize.sh: set-up and build took $((t1 - t0)) s"
source jobs/env.sh
# detect_leaks=0: leak checking is off because the libraries we link keep
# process-lifetime allocations they never free (OpenMPI's MCA components and
# PMIx/hwloc state, LibTorch's operator registry), reported at every exit;
# ASan's memory-error checks (the point here) stay on. UBSan findings are
# fatal (-fno-sanitize-recover=undefined), with a stack trace.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0:abort_on_error=0:strict_string_checks=1:detect_stack_use_after_return=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
ctest --test-dir build-asan --output-on-failure -j "$(nproc)" --timeout 1800
echo "test-sanitize.sh: tests took $(( $(date +%s) - t1 )) s"
