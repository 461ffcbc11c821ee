#!/usr/bin/env bash
# The whole test suite built and run under AddressSanitizer + UBSan, in its
# own build directory (build-asan, -DVITKD_SANITIZE=ON). Slower than
# jobs/test.sh (build about 3x, tests about 2-3x), so not part of it.
# Works from a fresh clone: installs what is needed first.
set -euo pipefail
cd "$(dirname "$0")/.."
t0=$(date +%s)
bash jobs/setup.sh
# detect_leaks=0: leak checking is off because the libraries we link keep
# process-lifetime allocations they never free, reported at every exit of
# every process (seen: OpenMPI's ompi_op_base_op_select and its dlopen'ed MCA
# components, already when gtest lists the tests during the build); ASan's
# memory-error checks, the point here, stay on. UBSan findings are fatal
# (-fno-sanitize-recover=undefined) and print a stack trace. Set before the
# build: gtest_discover_tests runs the test binary at build time.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0:strict_string_checks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DVITKD_SANITIZE=ON
cmake --build build-asan -j "$(nproc --all)"
t1=$(date +%s)
echo "test-sanitize.sh: set-up and build took $((t1 - t0)) s"
source jobs/env.sh
ctest --test-dir build-asan --output-on-failure -j "$(nproc --all)" --timeout 1800
echo "test-sanitize.sh: tests took $(( $(date +%s) - t1 )) s"
