#!/usr/bin/env bash
# The GPU device run's rehearsal as a CI lane (docs/gpu.md, "The rehearsal"):
# the carried Debian packages (jobs/gpu/prepare.sh) and the binaries of
# build-torch2 (jobs/lanes/torch2.sh, against the torch2 venv's torch, which
# stands in for the device's site-packages) recorded as a prebuilt
# (jobs/gpu/pack.sh --from), then, each in a mount namespace without ssh,
# the system's OpenMPI, PMIx, HDF5, Kokkos, LibTorch, the CUDA toolkit,
# binutils, dpkg, compilers, CMake and the build folders (jobs/gpu/rehearse.sh):
#   1. the device run as it starts there: a_launch (start-up, 2-rank MPI
#      launch, library loading, one CPU training step) must pass, the GPU
#      checks skip (no GPU in CI);
#   2. the whole dry run (check.sh --dry-run-cpu, both device commands'
#      checks, the CPU standing in for cuda): every check that can run on
#      the CPU must pass, from the carried files alone (jobs/gpu/preflight.sh
#      does the same with the device's carry before a lease);
#   3. the negative control: the same carry less the carried HDF5 runtime
#      must fail in one line naming the missing library, so that the
#      rehearsal is shown able to fail.
# About 3 minutes after jobs/lanes/torch2.sh (the .deb download included).
#
#   bash jobs/lanes/gpu_rehearsal.sh     # needs build-torch2 and root
set -euo pipefail
cd "$(dirname "$0")/../.."
t0=$(date +%s)
if [ ! -x build-torch2/vitkd ] || [ ! -x build-torch2/tests/gpu/vitkd_h5cmp ]; then
  echo "lane gpu-rehearsal: build-torch2/vitkd or its vitkd_h5cmp missing: run jobs/lanes/torch2.sh first" >&2; exit 1
fi
VENV=$(bash jobs/setup-torch2.sh | tail -n 1)
export PYTHON=$VENV/bin/python
# A carry of its own: gpu-carry/ may hold the device's prebuilt (jobs/gpu/pack.sh).
export CARRY=${VITKD_REHEARSAL_CARRY:-/tmp/vitkd-ci-carry}
bash jobs/gpu/pack.sh --from build-torch2
R=${VITKD_REHEARSAL_LANE_DIR:-/tmp/vitkd-rehearsal-lane}
export REHEARSAL_DIR=$R/ns   # rehearse.sh's own folder
rm -rf "$R" && mkdir -p "$R"

# summary_verdict FILE WHAT CONDITION: one line; exit 1 unless CONDITION holds
summary_verdict() { "$PYTHON" jobs/gpu/lib/verdict.py gpu-rehearsal "$@"; }

# 1. the start on a machine without GPU tools
OUT=$R/start bash jobs/gpu/rehearse.sh
summary_verdict "$R/start/summary.json" "the device run's start from carried files" \
  'c["a_launch"]["status"] == "pass" and n["fail"] == 0'

# 2. the whole dry run
OUT=$R/dry bash jobs/gpu/rehearse.sh --dry-run
summary_verdict "$R/dry/summary.json" "the whole dry run from carried files" \
  'n["fail"] == 0 and n["pass"] == 13 and c["g_distill_vits16"]["status"] == "pass"'

# 3. the negative control: no carried HDF5 runtime
rm -rf "$R/carry-less" && cp -a "$CARRY" "$R/carry-less"
awk -F'\t' '$2 != "libhdf5-openmpi-103-1"' "$CARRY/manifest.tsv" > "$R/carry-less/manifest.tsv"
rm -f "$R/carry-less"/debs/libhdf5-openmpi-103-1_*.deb
if CARRY=$R/carry-less OUT=$R/less bash jobs/gpu/rehearse.sh > "$R/less.log" 2>&1; then
  echo "lane gpu-rehearsal: the rehearsal passed without the carried HDF5 runtime: it cannot fail" >&2; exit 1
fi
summary_verdict "$R/less/summary.json" "without the carried HDF5 runtime the run stops, naming it" \
  '"unresolved libraries" in s["meta"].get("fatal", "") and "libhdf5_openmpi.so.103" in s["meta"]["fatal"] and n["pass"] == 0'
echo "gpu-rehearsal: $(($(date +%s) - t0)) s"
