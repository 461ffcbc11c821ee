#!/usr/bin/env bash
# The LibTorch 2.x lane: vitkd built against PyPI's torch (a CUDA build; the
# venv of jobs/setup-torch2.sh), with CUDA (/usr/local/cuda or CUDA_HOME) and
# NCCL (the nvidia-nccl wheel torch brings), in C++20
# with -Wall -Wextra -Werror on vitkd's own targets. Every translation unit
# with CUDA code compiles and links; then the unit tests, the MPI unit tests
# at 2 ranks, a representative set of end-to-end tests and the tests labelled
# `torch2` run on the CPU (a CUDA LibTorch runs on a machine without a GPU).
# HDF5, MPI, Kokkos, toml++ and GoogleTest come from Debian (jobs/setup.sh).
#
#   bash jobs/lanes/torch2.sh        # build folder: build-torch2
#   VITKD_TORCH2_VENV=DIR            # the venv (see jobs/setup-torch2.sh)
#   CUDA_HOME=DIR                    # the CUDA toolkit (default /usr/local/cuda)
#   VITKD_TORCH2_TESTS=all           # every CTest test instead of the subset (installs matplotlib
#                                    # into the venv for the report tests)
# Documented in docs/gpu.md. .ci/run times it as a lane (jobs/lib/lanes.sh).
set -euo pipefail
cd "$(dirname "$0")/../.."
t0=$(date +%s)
B=build-torch2

VENV=$(bash jobs/setup-torch2.sh | tail -n 1)
PY=$VENV/bin/python
TORCH_DIR=$("$PY" -c 'import os, torch; print(os.path.dirname(torch.__file__))')
TORCH_CMAKE=$("$PY" -c 'import torch; print(torch.utils.cmake_prefix_path)')
CUDA=${CUDA_HOME:-/usr/local/cuda}
if [ ! -x "$CUDA/bin/nvcc" ]; then
  echo "lane torch2: no CUDA toolkit at $CUDA (bin/nvcc missing); install CUDA 13 there or set CUDA_HOME" >&2
  exit 1
fi
echo "torch2: $("$PY" -c 'import torch; print("torch", torch.__version__, "CUDA", torch.version.cuda, "C++ ABI", int(torch.compiled_with_cxx11_abi()))')"
echo "torch2: CUDA toolkit $CUDA ($("$CUDA/bin/nvcc" --version | sed -n 's/.*release \([0-9.]*\).*/\1/p'))"

LAUNCH=()
command -v ccache >/dev/null && LAUNCH=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
# Only the wheel's CMake prefix: the torch folder, TORCH_CUDA_ARCH_LIST and
# NCCL_ROOT are derived from it (cmake/VitkdPipTorch.cmake), as a user's
# build gets them; NCCL must be found (VITKD_WITH_NCCL=ON).
cmake -S . -B "$B" -G Ninja -DCMAKE_BUILD_TYPE=Release "${LAUNCH[@]}" \
  -DCMAKE_PREFIX_PATH="$TORCH_CMAKE" -DCUDAToolkit_ROOT="$CUDA" -DVITKD_WITH_CUDA=ON -DVITKD_WITH_NCCL=ON \
  -DVITKD_WERROR=ON -DCMAKE_EXPORT_COMPILE_COMMANDS=ON -DPython3_EXECUTABLE="$PY" | tee "$B.configure.log" |
  grep -E "LibTorch|CUDA runtime|NCCL backend|Tests run|pip wheel" || true
grep -q "^-- LibTorch: .* with CUDA" "$B.configure.log" || {
  echo "lane torch2: the LibTorch of $TORCH_DIR has no CUDA (VITKD_TORCH_CUDA would be off)" >&2; exit 1; }
rm -f "$B.configure.log"
cmake --build "$B" -j "$(nproc --all)"

# Every source with CUDA code (a CUDA macro in its text), compiled with
# VITKD_TORCH_CUDA and, where it has one, linked into the binary.
"$PY" - "$B" <<'PY'
import json, os, re, subprocess, sys
b = sys.argv[1]
cmds = json.load(open(os.path.join(b, "compile_commands.json")))
macro = re.compile(r"\bVITKD_(TORCH_CUDA|HAVE_CUDART|HAVE_NCCL)\b")
units = sorted(os.path.relpath(c["file"]) for c in cmds
               if c["file"].endswith(".cpp") and "/src/" in c["file"] and macro.search(open(c["file"]).read()))
bad = []
for c in cmds:
    f = os.path.relpath(c["file"])
    if f in units:
        cmd = c.get("command", " ".join(c.get("arguments", [])))
        obj = os.path.join(b, re.search(r"-o (\S+)", cmd).group(1))
        flags = [m for m in ("VITKD_TORCH_CUDA=1", "VITKD_HAVE_CUDART=1", "VITKD_HAVE_NCCL=1") if "-D" + m in cmd]
        ok = os.path.exists(obj) and "VITKD_TORCH_CUDA=1" in flags
        print(f"torch2: CUDA unit {f}: {'compiled' if ok else 'NOT COMPILED'} ({' '.join(flags)})")
        bad += [] if ok else [f]
print(f"torch2: VITKD_TORCH_CUDA on: {len(units) - len(bad)} of {len(units)} CUDA units compiled")
ldd = subprocess.run(["ldd", os.path.join(b, "vitkd")], capture_output=True, text=True).stdout
missing = [l.strip() for l in ldd.splitlines() if "not found" in l]
linked = [l.split()[0] for l in ldd.splitlines() if re.search(r"lib(torch_cuda|c10_cuda|cudart|nccl)\.", l)]
print("torch2: vitkd links " + ", ".join(linked))
if bad or missing or not any("torch_cuda" in l for l in linked):
    sys.exit(f"lane torch2: units not compiled {bad}, libraries not found {missing}")
PY
t1=$(date +%s)
echo "torch2: configure and build took $((t1 - t0)) s"

source jobs/env.sh
J=$VITKD_TEST_JOBS
if [ "${VITKD_TORCH2_TESTS:-}" = all ]; then
  # The tests of analysis/'s report and figures draw with matplotlib, which the
  # venv has only when asked for here (the subset needs none of them).
  SKIP=()
  "$PY" -c 'import matplotlib' 2>/dev/null || "$PY" -m pip install -q matplotlib || true
  if ! "$PY" -c 'import matplotlib' 2>/dev/null; then
    echo "torch2: no matplotlib in $VENV (pip could not install it): the report and figure tests are left out"
    SKIP=(-E '^(analysis\.(report|lift)_|straggler\.report_)')
  fi
  ctest --test-dir "$B" --output-on-failure -j "$J" --timeout 900 "${SKIP[@]}"
  # Tests that need PyPI's torch (they skip, exit 77, without this variable).
  VITKD_TORCH2_PYTHON=$PY ctest --test-dir "$B" --output-on-failure -j "$J" --timeout 900 -L torch2
else
  # Unit tests (GoogleTest, reference, layout), the MPI unit tests at 2 ranks,
  # and end-to-end tests that cover training, distillation, sifting, resume,
  # rank invariance, TorchScript interop, the operator profile and user
  # errors (their setup fixtures are pulled in by CTest).
  E2E='^(distill\.student_learns_from_teacher|resume\.preempted_run_resumes_bit_identical|sift\.selection_same_at_one_and_np_ranks|scale\.params_equal_one_rank|export\.served_torchscript_matches_vitkd|faults\.nan_batch_is_skipped_and_counted|bad_input\.(unknown_key_in_file_names_the_nearest|device_cuda_without_cuda_is_refused_once|nccl_on_the_cpu_is_refused)|profile\.asked_steps_are_profiled_per_operator)\.np2$'
  # (analysis/report.py's test needs matplotlib, which the venv does not
  # install; it runs in jobs/test.sh, and nothing in it depends on LibTorch.)
  # One CTest call for all of them and the torch2-labelled tests, so that its
  # slots stay full to the end (VITKD_TORCH2_PYTHON: the torch2 tests skip
  # without it; no other test reads it).
  names() { ctest --test-dir "$B" -N -L "$1" | sed -n 's/^ *Test *#[0-9]*: \([^ ]*\).*/\1/p'; }  # LABEL
  UNIT=$(names unit | grep -v '^analysis\.' | paste -sd'|')
  TORCH2=$(names torch2 | paste -sd'|')
  [ -n "$UNIT" ] && [ -n "$TORCH2" ] || { echo "lane torch2: no unit or torch2 tests listed in $B" >&2; exit 1; }
  VITKD_TORCH2_PYTHON=$PY ctest --test-dir "$B" --output-on-failure -j "$J" --timeout 900 \
    -R "^($UNIT|$TORCH2)\$|^Mpi.*\.np2\$|$E2E"
fi
