#!/usr/bin/env bash
# The GPU device run's rehearsal as a CI lane (docs/gpu.md, "The rehearsal"):
# the carried Debian packages (jobs/gpu/prepare.sh) and the binaries of
# build-torch2 (jobs/lanes/torch2.sh, against the torch2 venv's torch, which
# stands in for the device's site-packages) recorded as a prebuilt
# (jobs/gpu/pack.sh --from), then jobs/gpu/rehearse.sh: jobs/gpu/check.sh in
# a mount namespace without ssh, the system's OpenMPI, PMIx, HDF5, Kokkos,
# LibTorch, the CUDA toolkit and the build folders. There is no GPU in CI: the
# GPU checks skip, a_launch (start-up, 2-rank MPI launch, library loading,
# one CPU training step) must pass, and the lane fails otherwise. About a
# minute after jobs/lanes/torch2.sh (the .deb download included).
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
bash jobs/gpu/rehearse.sh
"$PYTHON" - /tmp/vitkd-rehearsal/out/summary.json <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
launch = next(c for c in s["checks"] if c["name"] == "a_launch")
if launch["status"] != "pass" or s["counts"]["fail"]:
    sys.exit(f"lane gpu-rehearsal: a_launch {launch['status']} ({launch['reason']}), {s['counts']}")
print(f"gpu-rehearsal: a_launch passed from the carried files alone; {s['counts']}")
PY
echo "gpu-rehearsal: $(($(date +%s) - t0)) s"
