#!/usr/bin/env bash
# shellcheck disable=SC2012  # ls on our own file names
# The device check: one command on a lent GPU machine (docs/gpu-design.md,
# "How to run the GPU check"). Run from the repository root after
# jobs/gpu/prepare.sh filled gpu-carry/ on a Debian 12 machine:
#
#   jobs/gpu/check.sh                 # on the GPU machine; results in $OUT
#   jobs/gpu/check.sh --dry-run-cpu   # anywhere: the same set-up, build and
#                                     # tests, the CPU standing in for cuda
#
# Steps: (1) print the versions of torch (its CUDA, NCCL, C++ ABI), nvcc, the
# compiler and glibc; (2) unpack gpu-carry/debs into $VITKD_DEPS (default
# /tmp/vitkd-deps) and set up the relocated OpenMPI, parallel HDF5, Kokkos,
# toml++, CLI11 and nlohmann_json; (3) configure and build vitkd (Release,
# ninja) against the Python torch's LibTorch, CUDA (nvcc) and the NCCL of
# the nvidia-nccl wheel, with the tests on (VITKD_GPU_TESTS_ONLY: only the
# gpu.* tests, so no GoogleTest is needed and nothing but vitkd and
# vitkd_h5cmp is compiled); the dry run builds with CUDA and NCCL too where
# nvcc and the wheel are there, so it compiles what the GPU run compiles;
# (4) `ldd` of vitkd and vitkd_h5cmp: any "not found" stops the script
# (exit 2); (5) print the checks with their time limits, then run
# `ctest -L gpu` (tests/gpu/checks.sh holds the checks, tests/gpu/run.sh
# runs one: skip rules, watchdog, fragment) with VITKD_GPU_OUT=$OUT,
# VITKD_GPU_DEADLINE and, for the dry run, VITKD_GPU_DRY_RUN=1; (6) write
# $OUT/summary.json from the fragments ($OUT/checks/<name>.json: name,
# status pass|fail|skip, reason, numbers, seconds) and CTest's own results
# (a test CTest stopped at its TIMEOUT, or one that ended without a
# fragment, is a fail with that reason), print it, and exit 1 if a check
# failed, else 0.
#
# The whole script, build included, stays under CHECK_BUDGET_S (default
# 470 s; dry run 7200 s): a check whose time limit does not fit in the time
# left is skipped (never started with a cut limit, which would report it
# failed for lack of time). The limits are multiplied by LIMIT_SCALE
# (default 1; dry run 10: two busy cores instead of a GPU). The CUDA library folders (CUDA_HOME/lib64 and the
# nvidia-* wheels torch brings) go on LD_LIBRARY_PATH. mpirun runs with
# --bind-to none.
#
# Options: --dry-run-cpu; --only=a_info,c_cuda_vs_cpu (those checks, and the
# ones they need); --skip-build (reuse $BUILD_DIR as it is).
# Environment: OUT (default ./gpu-out: logs, JSON), RUNS (default
# /tmp/vitkd-gpu-runs: run folders), VITKD_DEPS, BUILD_DIR (default
# build-gpu; dry run build-gpu-dry), JOBS (default nproc --all),
# CHECK_BUDGET_S, LIMIT_SCALE, STEPS (default 20; the dry run uses 6),
# PYTHON (default python3), VITKD_FALLBACK_ALL=1 (use every carried support
# library, not only those the system lacks).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
ROOT=$(pwd)

DRY=0
SKIP_BUILD=0
ONLY=""
for arg in "$@"; do
  case "$arg" in
    --dry-run-cpu) DRY=1 ;;
    --skip-build) SKIP_BUILD=1 ;;     # reuse $BUILD_DIR as it is
    --only=*) ONLY=${arg#--only=} ;;  # comma-separated check names
    -h|--help) awk 'NR > 2 && /^#/ {sub(/^# ?/, ""); print; next} NR > 2 {exit}' "$0"; exit 0 ;;
    *) echo "check.sh: unknown argument $arg" >&2; exit 2 ;;
  esac
done

OUT=${OUT:-$ROOT/gpu-out}
mkdir -p "$OUT" && OUT=$(cd "$OUT" && pwd)
mkdir -p "$OUT/logs" "$OUT/checks" "$OUT/results"
# Run folders (checkpoints, the synthetic 224x224 data: hundreds of MB) stay
# out of $OUT, which should hold only what is worth bringing back.
RUNS=${RUNS:-/tmp/vitkd-gpu-runs}
mkdir -p "$RUNS"
rm -f "$OUT/checks/"*.json "$OUT/summary.json" "$OUT/progress.log"
CARRY=${CARRY:-$ROOT/gpu-carry}
DEPS=${VITKD_DEPS:-/tmp/vitkd-deps}
PYTHON=${PYTHON:-python3}
JOBS=${JOBS:-$(nproc --all)}
if [ "$DRY" = 1 ]; then
  # Two busy cores instead of a GPU: fewer steps, longer limits, a cold build.
  STEPS=${STEPS:-6}; LIMIT_SCALE=${LIMIT_SCALE:-10}; CHECK_BUDGET_S=${CHECK_BUDGET_S:-7200}
  BUILD=${BUILD_DIR:-$ROOT/build-gpu-dry}
else
  STEPS=${STEPS:-20}; LIMIT_SCALE=${LIMIT_SCALE:-1}; CHECK_BUDGET_S=${CHECK_BUDGET_S:-470}
  BUILD=${BUILD_DIR:-$ROOT/build-gpu}
fi
T0=$(date +%s)
DEADLINE=$((T0 + CHECK_BUDGET_S))

log() { printf '[gpu-check %s +%3ds] %s\n' "$(date +%H:%M:%S)" $(($(date +%s) - T0)) "$*" | tee -a "$OUT/progress.log"; }

# ---------------------------------------------------------------------------
# 1. System record: the versions that decide whether the build can work first
# ---------------------------------------------------------------------------
NVCC_BIN=$(command -v nvcc || echo "${CUDA_HOME:-/usr/local/cuda}/bin/nvcc")
log "versions: $($PYTHON -c 'import torch
nccl = ".".join(map(str, torch.cuda.nccl.version())) if hasattr(torch.cuda, "nccl") else "?"
print(f"torch {torch.__version__} (CUDA {torch.version.cuda}, NCCL {nccl}, C++ ABI {int(torch.compiled_with_cxx11_abi())})")' 2>/dev/null || echo "torch not importable with $PYTHON"); nvcc $("$NVCC_BIN" --version 2>/dev/null | sed -n 's/.*release \([0-9.]*\).*/\1/p'); $(c++ --version 2>/dev/null | head -1); $(ldd --version 2>&1 | head -1)"
{
  echo "date: $(date -u +%FT%TZ)"
  echo "mode: $([ "$DRY" = 1 ] && echo dry-run-cpu || echo gpu)"
  echo "git: $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo none) $(git -C "$ROOT" status --porcelain 2>/dev/null | wc -l) changed files"
  echo "--- /etc/os-release"; cat /etc/os-release 2>/dev/null
  echo "--- ldd --version"; ldd --version 2>&1 | head -1
  echo "--- uname"; uname -a
  echo "--- cores: $(nproc --all), memory: $(awk '/MemTotal/ {print $2 " kB"}' /proc/meminfo)"
  echo "--- cmake: $(cmake --version 2>/dev/null | head -1), ninja: $(ninja --version 2>/dev/null), c++: $(c++ --version 2>/dev/null | head -1)"
  echo "--- nvcc"; (command -v nvcc && nvcc --version | tail -2) 2>&1
  echo "--- python: $(command -v "$PYTHON") $($PYTHON --version 2>&1)"
  $PYTHON - <<'PY' 2>&1
import importlib
for m in ("torch", "numpy", "h5py"):
    try:
        mod = importlib.import_module(m)
        print(f"{m} {getattr(mod, '__version__', '?')}")
    except Exception as e:  # noqa: BLE001
        print(f"{m}: not importable ({e.__class__.__name__}: {e})")
try:
    import torch
    print("torch.cuda.is_available", torch.cuda.is_available(), "cuda", torch.version.cuda)
    print("torch cxx11 abi", torch._C._GLIBCXX_USE_CXX11_ABI)
    print("torch cmake prefix", torch.utils.cmake_prefix_path)
except Exception as e:  # noqa: BLE001
    print("torch details unavailable:", e)
PY
} > "$OUT/system.txt" 2>&1
log "system: $(. /etc/os-release 2>/dev/null; echo "${PRETTY_NAME:-unknown OS}"), $(ldd --version 2>&1 | head -1), $(nproc --all) cores (details: $OUT/system.txt)"

# ---------------------------------------------------------------------------
# 2. Unpack the carried packages and set up the environment
# ---------------------------------------------------------------------------
if [ ! -s "$CARRY/manifest.tsv" ]; then
  log "FATAL: $CARRY/manifest.tsv missing: run jobs/gpu/prepare.sh on a Debian 12 machine first"
  exit 2
fi

unpack_deb() {  # file dest
  if command -v dpkg >/dev/null 2>&1; then
    dpkg -x "$1" "$2"
  else
    local tmp
    tmp=$(mktemp -d)
    (cd "$tmp" && ar x "$1") || return 1
    local data
    data=$(ls "$tmp"/data.tar.* 2>/dev/null | head -1)
    case "$data" in
      *.xz) tar -xJf "$data" -C "$2" ;;
      *.zst) zstd -dc "$data" | tar -x -C "$2" ;;
      *.gz) tar -xzf "$data" -C "$2" ;;
      *) tar -xf "$data" -C "$2" ;;
    esac
    local rc=$?
    rm -rf "$tmp"
    return $rc
  fi
}

STAMP="$DEPS/.manifest.sha256"
if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$(sha256sum < "$CARRY/manifest.tsv")" ]; then
  log "deps: $DEPS already unpacked from this manifest"
else
  log "deps: unpacking $(($(wc -l < "$CARRY/manifest.tsv") - 1)) entries of $CARRY/manifest.tsv into $DEPS"
  rm -rf "$DEPS"
  mkdir -p "$DEPS/primary" "$DEPS/support"
  while IFS=$'\t' read -r role pkg _ _ file; do
    case "$role" in primary|support) ;; *) continue ;; esac
    unpack_deb "$CARRY/$file" "$DEPS/$role" || { log "FATAL: cannot unpack $file ($pkg)"; exit 2; }
  done < <(tail -n +2 "$CARRY/manifest.tsv")
  # Absolute symlinks (zlib1g-dev's libz.so -> /lib/...) point into the
  # system; point them at the unpacked file when there is one.
  for root in "$DEPS/primary" "$DEPS/support"; do
    while IFS= read -r l; do
      t=$(readlink "$l")
      if [ -e "$root$t" ]; then ln -sfn "$root$t" "$l"; fi
    done < <(find "$root" -type l -lname '/*')
  done
  sha256sum < "$CARRY/manifest.tsv" > "$STAMP"
fi

P=$DEPS/primary
S=$DEPS/support
PL=$P/usr/lib/x86_64-linux-gnu
MPI_LIBDIR=$PL/openmpi/lib

# OpenMPI, relocated: Debian configured it with prefix /usr, libdir
# /usr/lib/x86_64-linux-gnu/openmpi/lib, pkgdatadir /usr/share/openmpi (the
# wrapper data files), sysconfdir /etc/openmpi. OPAL_PREFIX alone moves only
# the directories that Debian derived from ${prefix}; each one is set
# explicitly so that none is left pointing at /usr (opal's installdirs "env"
# component reads all of these).
export OPAL_PREFIX=$P/usr
export OPAL_EXEC_PREFIX=$P/usr
export OPAL_BINDIR=$P/usr/bin
export OPAL_SBINDIR=$P/usr/sbin
export OPAL_LIBEXECDIR=$P/usr/libexec
export OPAL_DATAROOTDIR=$P/usr/share
export OPAL_DATADIR=$P/usr/share
export OPAL_MANDIR=$P/usr/share/man
export OPAL_INFODIR=$P/usr/share/info
export OPAL_SYSCONFDIR=$P/etc/openmpi
export OPAL_LIBDIR=$MPI_LIBDIR
export OPAL_INCLUDEDIR=$PL/openmpi/include
export OPAL_PKGDATADIR=$P/usr/share/openmpi
export OPAL_PKGLIBDIR=$MPI_LIBDIR/openmpi3
export OPAL_PKGINCLUDEDIR=$PL/openmpi/include/openmpi
# OpenMPI's external PMIx (libpmix2), also under a Debian-specific prefix.
export PMIX_PREFIX=$PL/pmix2
export PMIX_LIBDIR=$PL/pmix2/lib
export PMIX_MCA_mca_base_component_path=$PL/pmix2/lib/pmix
# One node: shared memory (vader) and self only, no network transports (their
# libraries - UCX, libfabric, PSM, verbs - are not carried). Single-copy
# (CMA/ptrace) is often forbidden in containers.
export OMPI_MCA_pml=ob1
export OMPI_MCA_btl=self,vader
export OMPI_MCA_osc=^ucx
export OMPI_MCA_btl_vader_single_copy_mechanism=none
export OMPI_MCA_mca_base_component_show_load_errors=0
# shellcheck source=jobs/env.sh
. "$ROOT/jobs/env.sh"   # run as root, oversubscribe, OMP_NUM_THREADS, HDF5 locking

# Wrapper names that Debian's alternatives would create (not in the .debs),
# and h5pcc with its install paths moved to the unpacked prefix. Its link
# line names -lcrypto -lcurl -lsz, whose development links (libcurl.so, ...)
# no generic system has; libhdf5_openmpi.so itself records them (NEEDED), so
# the dynamic loader and the linker still find them, and vitkd does not call
# them: the wrapper's list keeps -lz -ldl -lm. Debian's h5pcc links the
# static libhdf5.a and the high-level library by default; this one links
# the shared libhdf5_openmpi.so (the carried runtime package) and no HL
# library (vitkd does not use it; libhdf5-openmpi-hl-100 is not carried).
BIN=$DEPS/bin
mkdir -p "$BIN"
for w in mpicc mpicxx mpic++ mpiCC; do ln -sfn "$P/usr/bin/$w.openmpi" "$BIN/$w"; done
ln -sfn "$P/usr/bin/orterun" "$BIN/mpirun"
ln -sfn "$P/usr/bin/orterun" "$BIN/mpiexec"
ln -sfn "$P/usr/bin/ompi_info" "$BIN/ompi_info"
sed -e "s|^prefix=\"/usr\"|prefix=\"$P/usr\"|" \
    -e 's|^CCBASE=.*|CCBASE="mpicc"|' -e 's|^CLINKERBASE=.*|CLINKERBASE="mpicc"|' \
    -e 's|^H5BLD_LIBS=.*|H5BLD_LIBS="-lz -ldl -lm"|' \
    -e 's|^STATIC_AVAILABLE=.*|STATIC_AVAILABLE="no"|' -e 's|^HL=.*|HL=""|' \
    "$P/usr/bin/h5pcc.openmpi" > "$BIN/h5pcc"
chmod +x "$BIN/h5pcc"

# Support libraries: each soname the system lacks is linked into a fallback
# directory at the end of LD_LIBRARY_PATH, so that the system's own copy wins
# where there is one (VITKD_FALLBACK_ALL=1 links all of them).
FALLBACK=$DEPS/fallback-lib
rm -rf "$FALLBACK"
mkdir -p "$FALLBACK"
system_sonames=$(ldconfig -p 2>/dev/null | awk '/=>/ {print $1}' | sort -u)
linked=()
while IFS= read -r f; do
  so=$(objdump -p "$f" 2>/dev/null | awk '/SONAME/ {print $2}')
  [ -n "$so" ] || continue
  [ -e "$FALLBACK/$so" ] && continue
  if [ "${VITKD_FALLBACK_ALL:-0}" = 1 ] || ! grep -qxF "$so" <<< "$system_sonames"; then
    ln -sfn "$(readlink -f "$f")" "$FALLBACK/$so"
    linked+=("$so")
  fi
done < <(find "$S/lib/x86_64-linux-gnu" "$S/usr/lib/x86_64-linux-gnu" -maxdepth 1 -name 'lib*.so.*' 2>/dev/null | sort)
log "deps: ${#linked[@]} carried libraries used as fallbacks: ${linked[*]:-none}"

# LibTorch of the Python torch (the GPU machine); Debian's system LibTorch
# when that Python torch has no CMake package (the dry run here).
TORCH_PREFIX=$($PYTHON -c 'import torch, os; p = torch.utils.cmake_prefix_path; print(p if os.path.isfile(os.path.join(p, "Torch", "TorchConfig.cmake")) else "")' 2>/dev/null)
TORCH_LIB=""
if [ -n "$TORCH_PREFIX" ]; then
  TORCH_LIB=$($PYTHON -c 'import torch, os; print(os.path.join(os.path.dirname(torch.__file__), "lib"))')
  TORCH_ABI=$($PYTHON -c 'import torch; print(int(torch._C._GLIBCXX_USE_CXX11_ABI))')
  log "torch: $($PYTHON -c 'import torch; print(torch.__version__)') at $TORCH_PREFIX, _GLIBCXX_USE_CXX11_ABI=$TORCH_ABI"
  if [ "$TORCH_ABI" != 1 ]; then
    # toml++ and Kokkos from Debian are C++ libraries built with the new ABI
    # (std::__cxx11::basic_string in their interfaces); HDF5 and MPI are C.
    log "WARNING: this torch uses the pre-C++11 ABI: linking Debian's libtomlplusplus and libtrilinos_kokkoscore will likely fail (undefined std::string symbols)"
  fi
else
  log "torch: $PYTHON's torch has no CMake package; using the system LibTorch"
fi

# NCCL of the nvidia-nccl wheel: headers in nvidia/nccl/include, the library
# as libnccl.so.2 only; VitkdNccl.cmake looks for NCCL_ROOT/{include,lib}/
# nccl.h and libnccl.so, so NCCL_ROOT is a scratch folder of links.
NCCL_ROOT=""
NCCL_WHEEL=$($PYTHON -c 'import nvidia.nccl, os; print(list(nvidia.nccl.__path__)[0])' 2>/dev/null)
if [ -z "$NCCL_WHEEL" ]; then
  NCCL_WHEEL=$($PYTHON -c 'import site; print("\n".join(site.getsitepackages()))' 2>/dev/null |
               while read -r d; do [ -d "$d/nvidia/nccl" ] && echo "$d/nvidia/nccl" && break; done)
fi
if [ -n "$NCCL_WHEEL" ] && [ -f "$NCCL_WHEEL/include/nccl.h" ]; then
  NCCL_ROOT=$DEPS/nccl
  mkdir -p "$NCCL_ROOT/lib"
  ln -sfn "$NCCL_WHEEL/include" "$NCCL_ROOT/include"
  so=$(ls "$NCCL_WHEEL"/lib/libnccl.so* 2>/dev/null | head -1)
  [ -n "$so" ] && ln -sfn "$so" "$NCCL_ROOT/lib/libnccl.so" && ln -sfn "$so" "$NCCL_ROOT/lib/libnccl.so.2"
  log "nccl: $NCCL_WHEEL ($(basename "${so:-none}"))"
else
  log "nccl: no nvidia-nccl wheel found"
fi

# cuDNN of the nvidia-cudnn wheel, as hints for the Torch package's CUDA
# set-up (it looks for cuDNN when torch was built with it).
CUDNN_WHEEL=$($PYTHON -c 'import nvidia.cudnn, os; print(list(nvidia.cudnn.__path__)[0])' 2>/dev/null)
if [ -n "$CUDNN_WHEEL" ] && [ -d "$CUDNN_WHEEL/include" ]; then
  export CUDNN_ROOT=$CUDNN_WHEEL CUDNN_ROOT_DIR=$CUDNN_WHEEL CUDNN_INCLUDE_PATH=$CUDNN_WHEEL/include
  export CUDNN_INCLUDE_DIR=$CUDNN_WHEEL/include CUDNN_LIBRARY_PATH=$CUDNN_WHEEL/lib
  log "cudnn: $CUDNN_WHEEL"
fi

CUDA_HOME=${CUDA_HOME:-$(dirname "$(dirname "$(command -v nvcc 2>/dev/null || echo /usr/local/cuda/bin/nvcc)")")}
export PATH=$BIN:$P/usr/bin:$PATH
# The CUDA libraries torch and vitkd load (libcudart, cuBLAS, cuDNN, NCCL):
# the nvidia-* wheels' folders next to torch (what torch's own RPATH names),
# then the toolkit's, so that no ld.so.conf entry is needed.
CUDA_LIBS=""
if [ -n "$TORCH_LIB" ]; then
  for d in "$(dirname "$(dirname "$TORCH_LIB")")"/nvidia/*/lib; do [ -d "$d" ] && CUDA_LIBS=$CUDA_LIBS$d:; done
fi
for d in "$CUDA_HOME/lib64" "$CUDA_HOME/targets/x86_64-linux/lib"; do [ -d "$d" ] && CUDA_LIBS=$CUDA_LIBS$d:; done
export LD_LIBRARY_PATH=${TORCH_LIB:+$TORCH_LIB:}${NCCL_ROOT:+$NCCL_ROOT/lib:}$CUDA_LIBS$MPI_LIBDIR:$PL:$P/lib/x86_64-linux-gnu:$PL/pmix2/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}:$FALLBACK
export CUDA_HOME NCCL_ROOT TORCH_LIB BIN
{
  echo "PATH=$PATH"; echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
  env | grep -E '^(OPAL|PMIX|OMPI|HDF5)_' | sort
  echo "fallback libraries: ${linked[*]:-none}"
  echo "--- mpicc --showme"; mpicc --showme 2>&1
  echo "--- mpicxx --showme"; mpicxx --showme 2>&1
  echo "--- h5pcc -show"; h5pcc -show 2>&1
  echo "--- mpirun --version"; mpirun --version 2>&1 | head -2
} > "$OUT/env.txt" 2>&1
log "mpi: $(mpicc --showme 2>&1 | head -c 300)"
if ! grep -q "^$P" <<< "$(mpicc --showme:incdirs 2>/dev/null)"; then
  log "FATAL: mpicc does not point into $P (see $OUT/env.txt)"
  exit 2
fi


# ---------------------------------------------------------------------------
# 3. Configure and build (vitkd and the gpu.* tests)
# ---------------------------------------------------------------------------
WITH_CUDA=ON
if [ "$DRY" = 1 ] && { [ ! -x "$CUDA_HOME/bin/nvcc" ] || [ -z "$NCCL_ROOT" ] || [ -z "$TORCH_PREFIX" ]; }; then
  WITH_CUDA=OFF
  log "WARNING: dry run without CUDA and NCCL (nvcc at $CUDA_HOME/bin: $([ -x "$CUDA_HOME/bin/nvcc" ] && echo yes || echo no), NCCL wheel: ${NCCL_ROOT:-none}, torch CMake package: ${TORCH_PREFIX:-none}): it does not compile what the GPU run compiles"
fi
TORCH_DIR=""
[ -n "$TORCH_LIB" ] && TORCH_DIR=$(dirname "$TORCH_LIB")
CMAKE_ARGS=(
  -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release
  -DVITKD_BUILD_TESTS=ON -DVITKD_GPU_TESTS_ONLY=ON -DVITKD_GPU_LIMIT_SCALE="$LIMIT_SCALE"
  -DPython3_EXECUTABLE="$(command -v "$PYTHON")"
  # The torch folder itself too: TorchConfig.cmake would otherwise take a
  # system libtorch ahead of its own (docs/gpu.md, pitfalls).
  -DCMAKE_PREFIX_PATH="${TORCH_PREFIX:+$TORCH_PREFIX;$TORCH_DIR;}$P/usr;$S/usr"
  -DMPI_C_COMPILER="$BIN/mpicc" -DMPI_CXX_COMPILER="$BIN/mpicxx" -DMPIEXEC_EXECUTABLE="$BIN/mpirun"
  -DHDF5_C_COMPILER_EXECUTABLE="$BIN/h5pcc" -DHDF5_NO_FIND_PACKAGE_CONFIG_FILE=ON
  -Dtomlplusplus_DIR="$PL/cmake/tomlplusplus"
  -DCLI11_DIR="$P/usr/share/cmake/CLI11" -Dnlohmann_json_DIR="$P/usr/share/cmake/nlohmann_json"
  -DKokkos_DIR="$PL/cmake/Kokkos" -DKokkos_ROOT="$P/usr"
  -DZLIB_ROOT="$S/usr" -DPNG_ROOT="$S/usr" -DJPEG_ROOT="$S/usr"
  # Every runtime path comes from LD_LIBRARY_PATH above, none from RUNPATHs
  # (which would put the carried support libraries ahead of the system's).
  -DCMAKE_SKIP_BUILD_RPATH=ON
)
command -v ccache > /dev/null && CMAKE_ARGS+=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
if [ "$WITH_CUDA" = ON ]; then
  # The architecture list spares the Torch package a GPU probe.
  export TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST:-9.0}
  CMAKE_ARGS+=(-DVITKD_WITH_CUDA=ON -DVITKD_WITH_NCCL=ON -DNCCL_ROOT="$NCCL_ROOT" -DCUDAToolkit_ROOT="$CUDA_HOME"
               -DTORCH_CUDA_ARCH_LIST="$TORCH_CUDA_ARCH_LIST"
               -DCMAKE_CUDA_COMPILER="$CUDA_HOME/bin/nvcc" -DCMAKE_CUDA_ARCHITECTURES=90)
else
  CMAKE_ARGS+=(-DVITKD_WITH_NCCL=OFF -DVITKD_WITH_CUDA=OFF)
fi

BUILD_OK=0
TB=$(date +%s)
if [ "$SKIP_BUILD" = 1 ] && [ -x "$BUILD/vitkd" ] && [ -f "$BUILD/CTestTestfile.cmake" ]; then
  log "build: skipped (--skip-build), using $BUILD"
  BUILD_OK=1
else
  log "configure: cmake ${CMAKE_ARGS[*]}"
  # A fresh cache each time (results of a failed find_package are cached);
  # ninja still reuses the objects whose commands did not change.
  rm -f "$BUILD/CMakeCache.txt"
  if cmake "${CMAKE_ARGS[@]}" > "$OUT/logs/configure.log" 2>&1; then
    log "build: ninja -j$JOBS in $BUILD"
    if cmake --build "$BUILD" -j "$JOBS" > "$OUT/logs/build.log" 2>&1; then
      BUILD_OK=1
    else
      log "build FAILED (tail of $OUT/logs/build.log):"; tail -20 "$OUT/logs/build.log"
    fi
  else
    log "configure FAILED (tail of $OUT/logs/configure.log):"; tail -30 "$OUT/logs/configure.log"
  fi
fi
BUILD_S=$(($(date +%s) - TB))
# What CMake found: the MPI, HDF5, Kokkos, toml++, CLI11, json, LibTorch it configured against.
grep -E '^(MPI_C_COMPILER|MPI_CXX_COMPILER|MPI_C_HEADER_DIR|MPI_mpi_LIBRARY|MPIEXEC_EXECUTABLE|HDF5_C_COMPILER_EXECUTABLE|HDF5_C_INCLUDE_DIR|HDF5_C_LIBRARY_hdf5|HDF5_IS_PARALLEL|VITKD_KOKKOS_INCLUDE_DIR|VITKD_KOKKOS_CORE_LIBRARY|tomlplusplus_DIR|CLI11_DIR|nlohmann_json_DIR|Torch_DIR|PNG_LIBRARY_RELEASE|JPEG_LIBRARY_RELEASE|ZLIB_LIBRARY_RELEASE|VITKD_NCCL_LIBRARY|VITKD_NCCL_INCLUDE_DIR|CUDAToolkit_NVCC_EXECUTABLE|Python3_EXECUTABLE)[:=]' \
  "$BUILD/CMakeCache.txt" 2>/dev/null | sed 's/^/  found: /' | tee "$OUT/cmake-found.txt"
grep -E 'LibTorch|CUDA runtime|NCCL backend|Kokkos:|Found MPI|Found HDF5|GPU checks' "$OUT/logs/configure.log" 2>/dev/null | sed 's/^/  cmake: /'
VITKD=$BUILD/vitkd
if [ "$BUILD_OK" = 1 ]; then
  : > "$OUT/ldd-vitkd.txt"
  for b in "$VITKD" "$BUILD/tests/gpu/vitkd_h5cmp"; do
    { echo "--- $b"; ldd "$b" 2>&1; } >> "$OUT/ldd-vitkd.txt"
  done
  if grep -q 'not found' "$OUT/ldd-vitkd.txt"; then
    log "FATAL: unresolved libraries (LD_LIBRARY_PATH in $OUT/env.txt): $(grep 'not found' "$OUT/ldd-vitkd.txt" | tr -s ' \t' ' ' | tr '\n' ';')"
    exit 2
  fi
  log "build: ok in ${BUILD_S} s ($(grep -cE 'libmpi|libhdf5|kokkos|toml' "$OUT/ldd-vitkd.txt") MPI/HDF5/Kokkos/toml++ libraries, $(grep -cE 'libtorch_cuda|libc10_cuda|libcudart|libnccl' "$OUT/ldd-vitkd.txt") CUDA/NCCL libraries; $OUT/ldd-vitkd.txt)"
fi

# ---------------------------------------------------------------------------
# 4. Data, the list of checks, ctest -L gpu
# ---------------------------------------------------------------------------
DATA=$ROOT/data/fmnist.h5
if [ "$BUILD_OK" = 1 ] && [ ! -s "$DATA" ]; then
  log "data: vitkd prepare fashion-mnist from $CARRY/fashion-mnist"
  mkdir -p "$ROOT/data"
  "$VITKD" prepare fashion-mnist --source "$CARRY/fashion-mnist" --out "$DATA" > "$OUT/logs/prepare-data.log" 2>&1 ||
    log "data: prepare FAILED (logs/prepare-data.log)"
fi

CHECKS=$(bash "$ROOT/tests/gpu/checks.sh" --list)
selected() { [ -z "$ONLY" ] || grep -qw "$1" <<< "${ONLY//,/ }"; }
ONLY_RE=""
if [ -n "$ONLY" ]; then ONLY_RE="^gpu\\.(${ONLY//,/|})\$"; fi
if [ "$DRY" = 1 ]; then
  log "on a GPU this would run (ctest -L gpu, time limits at LIMIT_SCALE=1, budget 470 s with the build):"
else
  log "checks (ctest -L gpu, time limits at LIMIT_SCALE=$LIMIT_SCALE, $((DEADLINE - $(date +%s))) s of the budget left):"
fi
GPU_SCALE=$([ "$DRY" = 1 ] && echo 1 || echo "$LIMIT_SCALE")
NEEDED=""   # what the selected checks need: CTest runs those too (fixtures)
while read -r name limit needs; do selected "$name" && NEEDED="$NEEDED $needs"; done <<< "$CHECKS"
SUM=0
while read -r name limit needs; do
  selected "$name" || grep -qw "$name" <<< "$NEEDED" || continue
  log "  gpu.$name  limit $((limit * GPU_SCALE)) s${needs:+ (after gpu.$needs: it reads its runs)}"
  SUM=$((SUM + limit * GPU_SCALE))
done <<< "$CHECKS"
log "  (the limits add up to $SUM s; a check starts only if its limit fits in what is left)"

CTEST_LOG=$OUT/logs/ctest.log
if [ "$BUILD_OK" = 1 ]; then
  log "ctest -L gpu${ONLY_RE:+ -R \"$ONLY_RE\"} in $BUILD ($([ "$DRY" = 1 ] && echo "dry run: cpu for cuda, limits x $LIMIT_SCALE" || echo cuda))"
  VITKD_GPU_OUT=$OUT VITKD_GPU_RUNS=$RUNS VITKD_GPU_DEADLINE=$DEADLINE VITKD_GPU_DRY_RUN=$DRY \
  VITKD_GPU_STEPS=$STEPS VITKD_GPU_PYTHON=$PYTHON VITKD_GPU_DATA=$DATA \
    ctest --test-dir "$BUILD" -L gpu ${ONLY_RE:+-R "$ONLY_RE"} --output-on-failure 2>&1 | tee "$CTEST_LOG" |
    grep --line-buffered -E '^ *[0-9]+/[0-9]+ Test|tests passed|gpu\.[a-z0-9_]+: (pass|fail|skip):'
else
  : > "$CTEST_LOG"
fi

# ---------------------------------------------------------------------------
# 5. Summary: the fragments, CTest's results, the build
# ---------------------------------------------------------------------------
"$PYTHON" - "$OUT" "$T0" "$DRY" "$BUILD_OK" "$BUILD_S" "$CTEST_LOG" "$ONLY" "$LIMIT_SCALE" "$CHECK_BUDGET_S" "$CHECKS" <<'PY'
import json, os, re, sys, time
out, t0, dry, build_ok, build_s, ctest_log, only, scale, budget, checks_list = sys.argv[1:]
t0, dry, build_ok, build_s, scale = int(t0), dry == "1", build_ok == "1", int(build_s), int(scale)
listed = []
for i, line in enumerate(checks_list.strip().splitlines(), 1):
    name, limit, *needs = line.split()
    listed.append((i, name, int(limit), needs))
wanted = set(only.split(",")) if only else None
if wanted:  # and what they need (CTest runs those first)
    wanted |= {n for _, name, _, needs in listed if name in wanted for n in needs}
# CTest's verdict per test, from its console lines:
#   3/12 Test  #3: gpu.b_bench_adamw ..........***Skipped   0.02 sec
ctest = {}
pat = re.compile(r"Test +#\d+: gpu\.(\S+) \.*\s*(?:\*+)?(Passed|Failed|Skipped|Timeout|Not Run|Exception[^0-9]*?|\w[\w ]*?)\s+([\d.]+) sec")
for line in open(ctest_log, errors="replace"):
    m = pat.search(line)
    if m:
        ctest[m.group(1)] = {"result": m.group(2).strip(), "seconds": float(m.group(3))}
checks = []
for order, name, limit, needs in listed:
    if wanted and name not in wanted:
        continue
    path = os.path.join(out, "checks", name + ".json")
    c = ctest.get(name)
    frag = json.load(open(path)) if os.path.isfile(path) else None
    if not build_ok:
        frag = {"name": name, "status": "fail", "reason": "vitkd did not build (logs/configure.log, logs/build.log)", "numbers": {}}
    elif c is None:
        frag = {"name": name, "status": "fail", "reason": "CTest did not run it (logs/ctest.log)", "numbers": {}}
    elif c["result"] == "Timeout":
        frag = dict(frag or {"name": name, "numbers": {}}, status="fail",
                    reason=f"CTest stopped it at its TIMEOUT after {c['seconds']:.0f} s" +
                           (f" (the check had said: {frag['status']}, {frag['reason']})" if frag else ""))
    elif c["result"] == "Not Run":
        frag = {"name": name, "status": "skip", "numbers": {},
                "reason": "not run: it needs " + ", ".join("gpu." + n for n in needs) + ", which did not pass"}
    elif frag is None:
        frag = {"name": name, "status": "fail", "numbers": {},
                "reason": f"it ended without a fragment (CTest: {c['result']}; logs/ctest.log)"}
    elif {"Passed": "pass", "Skipped": "skip"}.get(c["result"], "fail") != frag["status"]:
        frag = dict(frag, status="fail", reason=f"CTest says {c['result']}, the fragment {frag['status']}: {frag['reason']}")
    frag.setdefault("seconds", int(c["seconds"]) if c else 0)
    frag["order"] = order
    frag["ctest"] = c["result"] if c else None
    checks.append(frag)
summary = {
    "mode": "dry-run-cpu" if dry else "gpu",
    "seconds": int(time.time()) - t0,
    "build_seconds": build_s,
    "budget_seconds": int(budget),
    "limit_scale": scale,
    "counts": {s: sum(c["status"] == s for c in checks) for s in ("pass", "fail", "skip")},
    "checks": checks,
}
json.dump(summary, open(os.path.join(out, "summary.json"), "w"), indent=2)
print(f"\n=== vitkd GPU check ({summary['mode']}): {summary['counts']} in {summary['seconds']} s "
      f"(build {build_s} s) ===")
for c in checks:
    print(f"{c['status']:>4}  {c['name']:<22} {c.get('seconds', 0):>4} s  {c['reason']}")
print(f"summary: {os.path.join(out, 'summary.json')}; logs: {os.path.join(out, 'logs')}")
sys.exit(1 if summary["counts"]["fail"] else 0)
PY
rc=$?
cp -f "$BUILD/CMakeCache.txt" "$OUT/logs/" 2>/dev/null
exit $rc
