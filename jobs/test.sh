#!/usr/bin/env bash
# The README's test command: install what is needed, build, run every test.
set -euo pipefail
cd "$(dirname "$0")/.."
t0=$(date +%s)
bash jobs/setup.sh
bash jobs/build.sh
t1=$(date +%s)
echo "test.sh: set-up and build took $((t1 - t0)) s"
source jobs/env.sh
ctest --test-dir build --output-on-failure -j "$(nproc)" --timeout 900
echo "test.sh: tests took $(( $(date +%s) - t1 )) s"
