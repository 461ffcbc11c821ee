#!/usr/bin/env bash
# The README's test command: install what is needed, build, run every test.
# Each lane prints `lane NAME: N s`, and a table of them closes the run
# (jobs/lib/lanes.sh); under .ci/run the rows join CI's own table.
set -euo pipefail
cd "$(dirname "$0")/.."
source jobs/lib/lanes.sh
lanes_begin
trap 'if lanes_owner; then lanes_table; fi' EXIT
if lanes_owner; then lanes_disk_check; fi
lane setup bash jobs/setup.sh
lane build bash jobs/build.sh
# The main suite: every test of the build (OpenMPI, this CPU's precision).
# VITKD_TEST_JOBS (jobs/env.sh): two CTest slots per core.
lane main bash -c 'source jobs/env.sh && ctest --test-dir build --output-on-failure -j "$VITKD_TEST_JOBS" --timeout 900 -LE multinode'
# vitkd on a simulated 3-node Slurm cluster (tests/cluster, docs/cluster.md): root and
# network namespaces; where they cannot be made the lane says so and its row shows
# exit 77 (not a pass), and the other lanes still run.
lane multinode bash -c 'source jobs/env.sh && bash jobs/lanes/multinode.sh' || [ $? = 77 ]
# The same build with LibTorch restricted as on CPUs without native bf16: the
# tests whose result depends on the instruction set.
lane avx2 bash jobs/lanes/avx2.sh
# MPICH build (build-mpich): the MPI behaviours under another MPI and launcher.
lane mpich bash jobs/lanes/mpich.sh
# libFuzzer targets (clang, build-fuzz), 20 s each on their seed corpus.
lane fuzz bash jobs/lanes/fuzz.sh
