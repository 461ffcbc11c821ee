#!/usr/bin/env bash
# shellcheck disable=SC2317,SC2012  # check functions run indirectly; ls on our own file names
# The GPU check: one command on a lent GPU machine (docs/gpu-design.md,
# "How to run the GPU check"). Run from the repository root after jobs/gpu/prepare.sh filled
# gpu-carry/ on a Debian 12 machine:
#
#   jobs/gpu/check.sh                 # on the GPU machine; results in $OUT
#   jobs/gpu/check.sh --dry-run-cpu   # anywhere: same set-up and build, CUDA
#                                     # checks skipped, CPU checks with few steps
#
# Steps: (1) unpack gpu-carry/debs into $VITKD_DEPS (default /tmp/vitkd-deps)
# and set up the relocated OpenMPI, parallel HDF5, Kokkos and toml++;
# (2) configure and build vitkd (Release, ninja) against the Python torch's
# LibTorch, CUDA (nvcc) and the NCCL of the nvidia-nccl wheel; (3) run the
# checks below, each in its own time limit, each writing $OUT/logs/<name>.log
# and $OUT/checks/<name>.json; a failing check does not stop the others;
# (4) write $OUT/summary.json (name, status pass|fail|skip, reason, numbers,
# seconds) and print it. The whole script stays under CHECK_BUDGET_S
# (default 470 s): a check whose time limit does not fit in the time left is
# skipped (never started with a cut limit, which would report it failed for
# lack of time). The dry run multiplies the limits by LIMIT_SCALE (default 4)
# and has 3000 s. The versions of torch, CUDA, NCCL, the compiler and glibc
# are printed first; the CUDA library folders (CUDA_HOME/lib64 and the
# nvidia-* wheels torch brings) go on LD_LIBRARY_PATH, and any "not found"
# in `ldd vitkd` stops the script (exit 2). mpirun runs with --bind-to none.
#
# Checks (a feature vitkd does not have yet is a "skip" with the reason,
# found from `vitkd --help`, `vitkd keys` or `vitkd bench --help`):
#   a_info          nvidia-smi, vitkd --version, the build's dependencies
#   a_bench_gemm    vitkd bench gemm on the GPU (if bench gemm takes a device)
#   b_bench_adamw   vitkd bench adamw --steps 20: device AdamW against the host
#                   kernel, max_rel_diff <= 1e-6
#   c_cuda_vs_cpu   20 fp32 steps on cuda and on cpu, same seed: model weights
#                   within relative L2 1e-4
#   d_nccl_vs_mpi   1 rank, dist.backend nccl against mpi, 20 fp32 steps:
#                   bitwise or relative L2 <= 1e-5
#   e_two_ranks     2 ranks x batch 32 (MPI backend, one shared GPU) against
#                   1 rank x batch 64: relative L2 <= 1e-5
#   f_resume_*      a checkpoint written on one device resumes on the other
#                   (cuda->cpu and cpu->cuda)
#   g_throughput_*  images/s medians of vitkd and the PyTorch baseline, runs
#                   alternated (teacher, distill, ViT-S/16 224x224)
#   h_phase_timing  the teacher throughput runs' phase times (CUDA events on a
#                   GPU) add up to 0.75-1.05 of the run's time, and the
#                   timing log's own overhead is below 1 %
#
# Environment: OUT (default ./gpu-out: logs, JSON), RUNS (default
# /tmp/vitkd-gpu-runs: run folders), VITKD_DEPS, BUILD_DIR (default
# build-gpu), JOBS (default nproc --all), CHECK_BUDGET_S, STEPS (default 20;
# the dry run uses 6), PYTHON (default python3), VITKD_FALLBACK_ALL=1 (use
# every carried support library, not only those the system lacks).
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
    --only=*) ONLY=${arg#--only=} ;;  # comma-separated check names (debugging)
    -h|--help) sed -n '2,45p' "$0"; exit 0 ;;
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
rm -f "$OUT/checks/"*.json "$OUT/summary.json"
CARRY=${CARRY:-$ROOT/gpu-carry}
DEPS=${VITKD_DEPS:-/tmp/vitkd-deps}
BUILD=${BUILD_DIR:-$ROOT/build-gpu}
PYTHON=${PYTHON:-python3}
JOBS=${JOBS:-$(nproc --all)}
if [ "$DRY" = 1 ]; then
  # Two busy cores instead of a GPU: fewer steps, longer limits.
  STEPS=${STEPS:-6}; LIMIT_SCALE=${LIMIT_SCALE:-4}; CHECK_BUDGET_S=${CHECK_BUDGET_S:-3000}
else
  STEPS=${STEPS:-20}; LIMIT_SCALE=${LIMIT_SCALE:-1}; CHECK_BUDGET_S=${CHECK_BUDGET_S:-470}
fi
HALF=$((STEPS / 2))
T0=$(date +%s)
DEADLINE=$((T0 + CHECK_BUDGET_S))
export RUNS OUT CARRY DEPS BUILD PYTHON STEPS HALF DRY ROOT T0 DEADLINE

log() { printf '[gpu-check %s +%3ds] %s\n' "$(date +%H:%M:%S)" $(($(date +%s) - T0)) "$*" | tee -a "$OUT/progress.log"; }
export -f log

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
if ! mpicc --showme:incdirs 2>/dev/null | grep -q "^$P"; then
  log "FATAL: mpicc does not point into $P (see $OUT/env.txt)"
  exit 2
fi

# h5cmp: checkpoint comparison without h5py (jobs/gpu/h5cmp.c).
H5CMP=$DEPS/h5cmp
# (in $DEPS: h5pcc leaves its object file in the current directory)
if ! (cd "$DEPS" && h5pcc -O2 -o "$H5CMP" "$ROOT/jobs/gpu/h5cmp.c" -lm) > "$OUT/logs/h5cmp-build.log" 2>&1; then
  log "WARNING: h5cmp did not build ($OUT/logs/h5cmp-build.log): checks that compare checkpoints will fail"
fi
export H5CMP

# ---------------------------------------------------------------------------
# 3. Configure and build
# ---------------------------------------------------------------------------
CMAKE_ARGS=(
  -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DVITKD_BUILD_TESTS=OFF
  -DCMAKE_PREFIX_PATH="${TORCH_PREFIX:+$TORCH_PREFIX;}$P/usr;$S/usr"
  -DMPI_C_COMPILER="$BIN/mpicc" -DMPI_CXX_COMPILER="$BIN/mpicxx" -DMPIEXEC_EXECUTABLE="$BIN/mpirun"
  -DHDF5_C_COMPILER_EXECUTABLE="$BIN/h5pcc" -DHDF5_NO_FIND_PACKAGE_CONFIG_FILE=ON
  -Dtomlplusplus_DIR="$PL/cmake/tomlplusplus"
  -DKokkos_DIR="$PL/cmake/Kokkos" -DKokkos_ROOT="$P/usr"
  -DZLIB_ROOT="$S/usr" -DPNG_ROOT="$S/usr" -DJPEG_ROOT="$S/usr"
  # Every runtime path comes from LD_LIBRARY_PATH above, none from RUNPATHs
  # (which would put the carried support libraries ahead of the system's).
  -DCMAKE_SKIP_BUILD_RPATH=ON
)
if [ "$DRY" = 1 ]; then
  CMAKE_ARGS+=(-DVITKD_WITH_NCCL=OFF -DVITKD_WITH_CUDA=OFF)
else
  export TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST:-9.0}
  CMAKE_ARGS+=(-DVITKD_WITH_CUDA=ON -DVITKD_WITH_NCCL=ON -DNCCL_ROOT="$NCCL_ROOT" -DCUDAToolkit_ROOT="$CUDA_HOME"
               -DCMAKE_CUDA_COMPILER="$CUDA_HOME/bin/nvcc" -DCMAKE_CUDA_ARCHITECTURES=90)
fi

BUILD_OK=0
if [ "$SKIP_BUILD" = 1 ] && [ -x "$BUILD/vitkd" ]; then
  log "build: skipped (--skip-build), using $BUILD/vitkd"
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
# What CMake found: the MPI, HDF5, Kokkos, toml++ it configured against.
grep -E '^(MPI_C_COMPILER|MPI_CXX_COMPILER|MPI_C_HEADER_DIR|MPI_mpi_LIBRARY|HDF5_C_COMPILER_EXECUTABLE|HDF5_C_INCLUDE_DIR|HDF5_C_LIBRARY_hdf5|HDF5_IS_PARALLEL|VITKD_KOKKOS_INCLUDE_DIR|VITKD_KOKKOS_CORE_LIBRARY|tomlplusplus_DIR|Torch_DIR|PNG_LIBRARY_RELEASE|JPEG_LIBRARY_RELEASE|ZLIB_LIBRARY_RELEASE|VITKD_NCCL_LIBRARY|VITKD_NCCL_INCLUDE_DIR|CUDAToolkit_NVCC_EXECUTABLE)[:=]' \
  "$BUILD/CMakeCache.txt" 2>/dev/null | sed 's/^/  found: /' | tee "$OUT/cmake-found.txt"
grep -E 'NCCL backend|Kokkos:|Found MPI|Found HDF5|Found Torch' "$OUT/logs/configure.log" 2>/dev/null | sed 's/^/  cmake: /'
VITKD=$BUILD/vitkd
if [ "$BUILD_OK" = 1 ]; then
  ldd "$VITKD" > "$OUT/ldd-vitkd.txt" 2>&1
  if grep -q 'not found' "$OUT/ldd-vitkd.txt"; then
    log "FATAL: unresolved libraries (LD_LIBRARY_PATH in $OUT/env.txt): $(grep 'not found' "$OUT/ldd-vitkd.txt" | tr -s ' \t' ' ' | tr '\n' ';')"
    exit 2
  fi
  log "build: ok ($(grep -cE 'libmpi|libhdf5|kokkos|toml' "$OUT/ldd-vitkd.txt") MPI/HDF5/Kokkos/toml++ libraries; $OUT/ldd-vitkd.txt)"
fi
export VITKD BUILD_OK

# ---------------------------------------------------------------------------
# 4. Checks
# ---------------------------------------------------------------------------
# Inside a check: emit STATUS REASON [key=value ...] writes its fragment
# (values that parse as JSON are kept as JSON: numbers, objects, booleans).
emit() {
  "$PYTHON" - "$OUT/checks/$CHECK.json" "$CHECK" "$@" <<'PY'
import json, sys
path, name, status, reason, *kv = sys.argv[1:]
numbers = {}
for item in kv:
    k, _, v = item.partition("=")
    try:
        numbers[k] = json.loads(v)
    except ValueError:
        numbers[k] = v
with open(path, "w") as f:
    json.dump({"name": name, "status": status, "reason": reason, "numbers": numbers}, f)
PY
}
# A vitkd command with its own log line, limited to the check's time.
vk() { "$VITKD" "$@"; }
# Settings that make short runs short: no start-up FLOP/s probe, no
# evaluation, no periodic checkpoints or timing rows beyond the end.
QUICK=(--set train.mfu_ceiling=1e12 --set train.final_eval=false --set train.eval_every_epochs=0
       --set train.timing_every_steps=1000 --set checkpoint.resume=never)
FP32=(--set precision.compute=fp32)
export -f emit vk

have_key() { "$VITKD" keys 2>/dev/null | awk '{print $1}' | grep -qx "$1"; }
# --set run.device=X, or nothing for cpu when vitkd has no run.device yet.
devset() {
  if have_key run.device; then echo "--set run.device=$1"; elif [ "$1" = cpu ]; then echo ""; else return 1; fi
}
last_ckpt() { ls "$1"/checkpoint-step*.h5 2>/dev/null | sort | tail -1; }
# train DIR DEVICE [extra args...]: 1 rank, STEPS fp32 steps from the seed
train1() {
  local dir=$1 dev=$2; shift 2
  # shellcheck disable=SC2046
  vk train "$ROOT/inputs/fmnist-teacher.toml" $(devset "$dev") "${QUICK[@]}" "${FP32[@]}" \
    --set train.max_steps="$STEPS" --set data.path="$DATA" --set run.out_dir="$dir" "$@"
}
cmp_json() { "$H5CMP" "$@"; }

# Stops a process and everything it started (children first), by process id:
# through /proc's children lists, or pkill -P where those are missing.
kill_tree() {  # signal pid
  local sig=$1 pid=$2 c
  # shellcheck disable=SC2013  # the children lists hold process ids separated by spaces
  for c in $(cat /proc/"$pid"/task/*/children 2>/dev/null); do kill_tree "$sig" "$c"; done
  [ -r /proc/"$pid"/task ] || pkill "-$sig" -P "$pid" 2>/dev/null
  kill "-$sig" "$pid" 2>/dev/null
}

CHECK_SEQ=0
run_check() {  # name limit_s function
  local name=$1 limit=$(($2 * LIMIT_SCALE)) fn=$3 start now left rc
  CHECK_SEQ=$((CHECK_SEQ + 1))
  if [ -n "$ONLY" ] && ! grep -qw "$name" <<< "${ONLY//,/ }"; then return; fi
  now=$(date +%s); left=$((DEADLINE - now - 5))
  export CHECK=$name
  if [ "$left" -lt 15 ]; then
    emit skip "no time left in the ${CHECK_BUDGET_S} s budget"
  elif [ "$limit" -gt "$left" ]; then
    # Skipped, not started with a cut limit (it would fail for lack of time).
    emit skip "its time limit of $limit s does not fit in the $left s left of the ${CHECK_BUDGET_S} s budget"
  elif [ "$BUILD_OK" != 1 ] && [ "$name" != a_info ]; then
    emit fail "vitkd did not build (logs/build.log, logs/configure.log)"
  else
    log "check $name (limit ${limit} s)"
    start=$(date +%s)
    ( "$fn" ) > "$OUT/logs/$name.log" 2>&1 &
    local pid=$!
    # The limit covers the whole check (all its runs); on expiry the check's
    # process tree is stopped (TERM, then KILL).
    ( sleep "$limit"; kill_tree TERM "$pid"; sleep 5; kill_tree KILL "$pid" ) &
    local watchdog=$!
    wait "$pid"; rc=$?
    kill "$watchdog" 2>/dev/null; wait "$watchdog" 2>/dev/null
    if [ ! -s "$OUT/checks/$name.json" ]; then
      if [ $(($(date +%s) - start)) -ge "$limit" ]; then
        emit fail "time limit of $limit s reached"
      else
        emit fail "the check ended (exit $rc) without a result; see logs/$name.log"
      fi
    fi
    "$PYTHON" - "$OUT/checks/$name.json" $(($(date +%s) - start)) "$rc" "$CHECK_SEQ" <<'PY'
import json, sys
p = sys.argv[1]
d = json.load(open(p))
d["seconds"] = int(sys.argv[2])
d["exit"] = int(sys.argv[3])
d["order"] = int(sys.argv[4])
json.dump(d, open(p, "w"))
PY
  fi
  log "  -> $("$PYTHON" -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d["status"], "-", d["reason"])' "$OUT/checks/$name.json")"
}

# ---- data -------------------------------------------------------------------
DATA=$ROOT/data/fmnist.h5
if [ "$BUILD_OK" = 1 ] && [ ! -s "$DATA" ]; then
  log "data: vitkd prepare fashion-mnist from $CARRY/fashion-mnist"
  mkdir -p "$ROOT/data"
  "$VITKD" prepare fashion-mnist --source "$CARRY/fashion-mnist" --out "$DATA" > "$OUT/logs/prepare-data.log" 2>&1 ||
    log "data: prepare FAILED (logs/prepare-data.log)"
fi
export DATA

# ---- a: system and build record, GEMM bench -----------------------------------
check_a_info() {
  nvidia-smi 2>&1 | tee "$OUT/nvidia-smi.txt" || true
  local ver gpu
  ver=$("$VITKD" --version 2>&1 | head -1)
  gpu=$(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | head -1)
  echo "vitkd: $ver"
  if [ "$BUILD_OK" != 1 ]; then emit fail "vitkd did not build" gpu="$gpu"; return; fi
  local feats=()
  have_key run.device && feats+=(run.device)
  "$VITKD" bench --help 2>&1 | grep -q 'bench adamw' && feats+=(bench_adamw)
  grep -q 'VITKD_HAVE_NCCL' "$BUILD/build.ninja" 2>/dev/null && feats+=(nccl)
  emit pass "recorded" vitkd="$ver" gpu="${gpu:-none}" features="${feats[*]:-none}"
}

check_a_bench_gemm() {
  local help args=() dev=cuda
  [ "$DRY" = 1 ] && dev=cpu   # the dry run measures the CPU briefly
  help=$("$VITKD" bench gemm --help 2>&1)
  echo "$help"
  if grep -q -- '--device' <<< "$help"; then args=(--device "$dev")
  elif grep -q -- '--set' <<< "$help" && have_key run.device; then args=(--set run.device="$dev")
  else emit skip "vitkd bench gemm has no device option (vitkd bench gemm --help)"; return; fi
  [ "$DRY" = 1 ] && args+=(--millis 100)
  if vk bench gemm "${args[@]}" --out "$OUT/bench-gemm.json"; then
    emit pass "bench gemm on $dev ran" result="$(cat "$OUT/bench-gemm.json" 2>/dev/null || echo null)"
  else
    emit fail "vitkd bench gemm ${args[*]} failed"
  fi
}

# ---- b: device AdamW against the host kernel -----------------------------------
check_b_bench_adamw() {
  if ! "$VITKD" bench --help 2>&1 | grep -q 'bench adamw'; then
    emit skip "vitkd has no 'bench adamw' (vitkd bench --help)"; return
  fi
  # The dry run compares the device kernels run on the CPU with the host kernel.
  local line diff args=() dev=cuda
  [ "$DRY" = 1 ] && dev=cpu
  local help
  help=$("$VITKD" bench adamw --help 2>&1)
  grep -q -- '--device' <<< "$help" && args=(--device "$dev")
  if grep -q -- '--out' <<< "$help"; then
    # The JSON it prints spans several lines: read the --out file instead.
    rm -f "$OUT/bench-adamw.json"
    vk bench adamw --steps 20 "${args[@]}" --out "$OUT/bench-adamw.json"
    line=$("$PYTHON" -c 'import json,sys; print(json.dumps(json.load(open(sys.argv[1]))))' "$OUT/bench-adamw.json" 2>/dev/null)
  else
    line=$(vk bench adamw --steps 20 "${args[@]}" | tee /dev/stderr | grep max_rel_diff | tail -1)
  fi
  diff=$("$PYTHON" -c 'import json,sys; print(json.loads(sys.argv[1])["max_rel_diff"])' "$line" 2>/dev/null)
  if [ -z "$diff" ]; then emit fail "vitkd bench adamw gave no max_rel_diff (logs/b_bench_adamw.log)"; return; fi
  if "$PYTHON" -c 'import sys; sys.exit(0 if float(sys.argv[1]) <= 1e-6 else 1)' "$diff"; then
    emit pass "$dev: max_rel_diff $diff <= 1e-6" max_rel_diff="$diff" result="$line"
  else
    emit fail "$dev: max_rel_diff $diff > 1e-6" max_rel_diff="$diff" result="$line"
  fi
}

# verdict JSON TOL WHAT: emits pass when the comparison read both files and
# rel_l2 <= TOL (bitwise passes too), with the numbers in the reason.
verdict() {
  local line
  line=$("$PYTHON" -c '
import json, sys
d = json.loads(sys.argv[1]); tol = float(sys.argv[2])
ok = bool(d.get("ok")) and (d["bitwise"] or d["rel_l2"] <= tol)
how = "bitwise equal" if d["bitwise"] else f"relative L2 {d['"'"'rel_l2'"'"']:.3g}, max |diff| {d['"'"'max_abs'"'"']:.3g}"
if not d.get("ok"):
    how = "the checkpoints could not be compared (missing or different datasets)"
print(("pass" if ok else "fail") + "\t" + how + f" (tolerance: relative L2 {tol:g})")' "$1" "$2" 2>/dev/null) ||
    line=$'fail\tno comparison (h5cmp failed or a checkpoint is missing)'
  emit "${line%%$'\t'*}" "$3: ${line#*$'\t'}" compare="$1"
}

# ---- c: cuda against cpu ------------------------------------------------------
check_c_cuda_vs_cpu() {
  local r=$RUNS/c cj other=cuda
  rm -rf "$r"
  if [ "$DRY" = 1 ]; then
    other=cpu   # the dry run checks the comparison with a second cpu run
  elif ! have_key run.device; then
    emit skip "vitkd has no run.device key yet (vitkd keys)"; return
  fi
  train1 "$r/cpu" cpu || { emit fail "cpu run failed"; return; }
  train1 "$r/$other" "$other" || { emit fail "$other run failed"; return; }
  cj=$(cmp_json "$(last_ckpt "$r/cpu")" "$(last_ckpt "$r/$other")" model optimizer)
  echo "$cj"
  verdict "$cj" 1e-4 "$STEPS fp32 steps, $other against cpu, model+optimizer"
}

# ---- d: NCCL against MPI at 1 rank -----------------------------------------------
check_d_nccl_vs_mpi() {
  [ "$DRY" = 1 ] && { emit skip "dry run on CPU (NCCL needs CUDA)"; return; }
  have_key run.device || { emit skip "vitkd has no run.device key yet"; return; }
  grep -q VITKD_HAVE_NCCL "$BUILD/build.ninja" || { emit skip "vitkd was built without NCCL"; return; }
  local r=$RUNS/d cj
  rm -rf "$r"
  train1 "$r/mpi" cuda --set dist.backend=mpi || { emit fail "mpi backend run failed"; return; }
  if ! train1 "$r/nccl" cuda --set dist.backend=nccl; then
    emit fail "nccl backend run failed (see the log: a clear 'not supported' error there means the feature is missing)"; return
  fi
  cj=$(cmp_json "$(last_ckpt "$r/mpi")" "$(last_ckpt "$r/nccl")" model optimizer)
  echo "$cj"
  verdict "$cj" 1e-5 "nccl against mpi, 1 rank, $STEPS fp32 steps, model+optimizer"
}

# ---- e: 2 ranks x 32 against 1 rank x 64 -----------------------------------------
check_e_two_ranks() {
  local dev=cuda r=$RUNS/e cj
  if [ "$DRY" = 1 ]; then dev=cpu
  elif ! have_key run.device; then emit skip "vitkd has no run.device key yet"; return; fi
  rm -rf "$r"
  train1 "$r/one" "$dev" --set dist.backend=mpi --set data.batch_size=64 || { emit fail "1-rank run failed"; return; }
  # shellcheck disable=SC2046
  mpirun --bind-to none -n 2 "$VITKD" train "$ROOT/inputs/fmnist-teacher.toml" $(devset "$dev") "${QUICK[@]}" "${FP32[@]}" \
    --set train.max_steps="$STEPS" --set data.path="$DATA" --set run.out_dir="$r/two" \
    --set dist.backend=mpi --set data.batch_size=32 || { emit fail "2-rank run (mpirun -n 2) failed"; return; }
  cj=$(cmp_json "$(last_ckpt "$r/one")" "$(last_ckpt "$r/two")" model optimizer)
  echo "$cj"
  verdict "$cj" 1e-5 "$dev, 2 ranks x 32 against 1 rank x 64, $STEPS fp32 steps, model+optimizer"
}

# ---- f: a checkpoint written on one device resumes on the other -------------------
# Run A trains on device X with the schedule of STEPS steps and is stopped at
# step HALF by the test-only preemption (VITKD_TEST_PREEMPT_AT_STEP: it
# finishes the step, writes checkpoint-step<HALF>.h5 and exits with 75), so
# that the learning-rate schedule is the one of the full run (a run that
# simply ends at HALF and is then extended follows another cosine).
#  1. Round trip: a copy of A's checkpoint is resumed on device Y with
#     train.max_steps = HALF: no step is left, so Y writes the weights it
#     loaded straight back into a checkpoint at step HALF. Those must be
#     bitwise equal to A's (X -> file -> Y -> file loses nothing). If Y does
#     not write a new checkpoint the round trip is reported as not measured.
#  2. Resume: another copy is resumed on Y to STEPS steps and compared with
#     an uninterrupted STEPS-step run on Y (report: relative L2 and max |diff|;
#     the first HALF steps ran on X, so only rounding differences are
#     expected; pass needs the resume to succeed and the round trip to hold).
resume_check() {  # X Y
  local x=$1 y=$2 r=$RUNS/f-$1-$2 a rt rs full cj_rt cj_rs rc
  rm -rf "$r"; mkdir -p "$r/rt" "$r/resume"
  VITKD_TEST_PREEMPT_AT_STEP=$HALF train1 "$r/a" "$x" --set checkpoint.every_steps=0
  rc=$?
  a=$r/a/$(printf 'checkpoint-step%08d.h5' "$HALF")
  if [ "$rc" != 75 ] || [ ! -s "$a" ]; then emit fail "run A on $x: exit $rc, no checkpoint at step $HALF"; return; fi
  cp "$a" "$r/rt/"; cp "$a" "$r/resume/"
  local before
  before=$(stat -c %Y.%s "$r/rt/$(basename "$a")")
  train1 "$r/rt" "$y" --set checkpoint.resume=auto --set train.max_steps="$HALF" ||
    { emit fail "round trip: resuming on $y with 0 steps left failed"; return; }
  rt=$r/rt/$(basename "$a")
  if [ "$(stat -c %Y.%s "$rt")" = "$before" ] && [ "$(ls "$r/rt"/checkpoint-step*.h5 | wc -l)" = 1 ] &&
     cmp -s "$rt" "$a"; then
    cj_rt='{"measured": false}'
  else
    cj_rt=$(cmp_json "$a" "$(last_ckpt "$r/rt")" model optimizer)
  fi
  train1 "$r/resume" "$y" --set checkpoint.resume=auto ||
    { emit fail "resuming A's step-$HALF checkpoint on $y to step $STEPS failed" roundtrip="$cj_rt"; return; }
  train1 "$r/full" "$y" || { emit fail "uninterrupted run on $y failed" roundtrip="$cj_rt"; return; }
  rs=$(last_ckpt "$r/resume"); full=$(last_ckpt "$r/full")
  cj_rs=$(cmp_json "$full" "$rs" model)
  echo "round trip: $cj_rt"; echo "resumed vs uninterrupted: $cj_rs"
  "$PYTHON" - "$cj_rt" "$cj_rs" "$x" "$y" "$HALF" "$STEPS" > "$r/verdict.txt" <<'PY'
import json, sys
rt, rs = json.loads(sys.argv[1]), json.loads(sys.argv[2])
x, y, half, steps = sys.argv[3:]
if rs.get("step_b") != int(steps):
    print(f"fail\tthe resumed run ended at step {rs.get('step_b')}, not {steps}")
elif rt.get("measured") is False:
    print(f"fail\tresume {x}->{y} works, but the round trip was not measured (no checkpoint rewritten at step {half})")
elif not rt.get("bitwise"):
    print(f"fail\tthe step-{half} weights changed on the way {x} -> {y} -> file (max |diff| {rt.get('max_abs')})")
else:
    print(f"pass\t{x} step-{half} checkpoint -> {y}: bitwise round trip; resumed to {steps} vs uninterrupted "
          f"{y}: relative L2 {rs['rel_l2']:.3g}, max |diff| {rs['max_abs']:.3g}")
PY
  IFS=$'\t' read -r st reason < "$r/verdict.txt"
  emit "$st" "$reason" roundtrip="$cj_rt" resumed_vs_uninterrupted="$cj_rs"
}
check_f_resume_cuda_cpu() {
  if [ "$DRY" = 1 ]; then resume_check cpu cpu; return; fi
  have_key run.device || { emit skip "vitkd has no run.device key yet"; return; }
  resume_check cuda cpu
}
check_f_resume_cpu_cuda() {
  [ "$DRY" = 1 ] && { emit skip "dry run on CPU (f_resume_cuda_cpu ran cpu -> cpu)"; return; }
  have_key run.device || { emit skip "vitkd has no run.device key yet"; return; }
  resume_check cpu cuda
}

# ---- g: throughput, vitkd against the PyTorch baseline, alternated ------------------
# throughput NAME CONFIG STEPS VITKD-ARGS... -- BASELINE-ARGS...
throughput() {
  local name=$1 config=$2 steps=$3; shift 3
  local vargs=() bargs=() dev=cuda
  while [ $# -gt 0 ] && [ "$1" != -- ]; do vargs+=("$1"); shift; done
  shift
  bargs=("$@")
  if [ "$DRY" = 1 ]; then dev=cpu
  elif ! have_key run.device; then emit skip "vitkd has no run.device key yet"; return; fi
  local have_pt=1 r=$RUNS/g-$name
  "$PYTHON" -c 'import h5py, numpy, torch' 2>/dev/null || have_pt=0
  rm -rf "$r"; mkdir -p "$r"
  local i
  for i in 1 2 3; do
    # shellcheck disable=SC2046
    vk train "$config" $(devset "$dev") --set train.max_steps="$steps" --set train.epochs=1000 \
      --set train.final_eval=false --set train.eval_every_epochs=0 --set checkpoint.every_steps=0 \
      --set checkpoint.resume=never --set train.mfu_ceiling=1e12 --set data.path="${GDATA:-$DATA}" \
      --set run.out_dir="$r/vitkd-$i" "${vargs[@]}" || { emit fail "vitkd run $i failed"; return; }
    if [ "$have_pt" = 1 ]; then
      "$PYTHON" "$ROOT/benchmarks/pytorch_baseline.py" --device "$dev" --data "${GDATA:-$DATA}" \
        --max-steps "$steps" --epochs 1000 --out "$r/pytorch-$i/result.json" "${bargs[@]}" ||
        { emit fail "pytorch baseline run $i failed"; return; }
    fi
  done
  local js
  js=$("$PYTHON" - "$r" <<'PY'
import glob, json, statistics, sys
r = sys.argv[1]
out = {}
for who in ("vitkd", "pytorch"):
    v = [json.load(open(f))["images_per_second"] for f in sorted(glob.glob(f"{r}/{who}-*/result.json"))]
    if v:
        out[who] = {"images_per_second": v, "median": statistics.median(v)}
if "vitkd" in out and "pytorch" in out:
    out["vitkd_over_pytorch"] = out["vitkd"]["median"] / out["pytorch"]["median"]
print(json.dumps(out))
PY
)
  echo "$js"
  for f in "$r"/*/result.json; do
    [ -e "$f" ] && cp "$f" "$OUT/results/$name-$(basename "$(dirname "$f")").json"
  done
  local msg
  msg=$("$PYTHON" -c '
import json, sys
d = json.loads(sys.argv[1])
s = f"vitkd median {d['"'"'vitkd'"'"']['"'"'median'"'"']:.0f} img/s"
if "pytorch" in d:
    s += f", pytorch {d['"'"'pytorch'"'"']['"'"'median'"'"']:.0f} img/s (ratio {d['"'"'vitkd_over_pytorch'"'"']:.2f})"
print(s)' "$js")
  [ "$have_pt" = 1 ] || msg="$msg; pytorch baseline skipped ($PYTHON lacks h5py or numpy)"
  emit pass "$msg" throughput="$js" steps="$steps" device="$dev"
}
check_g_throughput_teacher() {
  local s=300; [ "$DRY" = 1 ] && s=5
  throughput teacher "$ROOT/inputs/fmnist-teacher.toml" "$s" --set data.augment=false -- \
    --mode teacher --dim 192 --depth 6 --heads 3 --batch-size 64 --warmup-steps 100 --threads 1
}
check_h_phase_timing() {
  ls "$RUNS"/g-teacher/vitkd-*/result.json > /dev/null 2>&1 ||
    { emit skip "no teacher throughput runs (g_throughput_teacher did not run)"; return; }
  local rows status
  rows=$("$PYTHON" - "$RUNS"/g-teacher/vitkd-*/result.json <<'PY'
import json, os, sys
rows = []
for f in sys.argv[1:]:
    r = json.load(open(f))
    phases = r["phase_seconds_rank0"]
    # train_seconds ends before the final checkpoint is written, and these
    # runs write no other (checkpoint.every_steps = 0, no evaluation): the
    # checkpoint phase is outside the run time the bound divides by.
    if isinstance(phases, dict):
        covered = sum(v for k, v in phases.items() if k not in ("checkpoint", "eval"))
    else:
        covered = sum(phases[:8])  # util/timing.hpp's order: checkpoint and eval are 8 and 9
    covered /= r["train_seconds"]
    rows.append({"run": os.path.basename(os.path.dirname(f)), "phases_over_run": round(covered, 4),
                 "log_overhead": r["timing_log_overhead_fraction"]})
print(json.dumps(rows))
PY
) || { emit fail "could not read the runs' result.json"; return; }
  echo "$rows"
  status=$("$PYTHON" -c 'import json, sys
ok = all(0.75 <= r["phases_over_run"] <= 1.05 and r["log_overhead"] < 0.01 for r in json.loads(sys.argv[1]))
print("pass" if ok else "fail")' "$rows")
  emit "$status" "phase times over run time within 0.75-1.05, timing-log overhead below 1 %" runs="$rows"
}
check_g_throughput_distill() {
  local s=300; [ "$DRY" = 1 ] && s=5
  local teacher
  teacher=$(last_ckpt "$RUNS/g-teacher/vitkd-1")
  [ -n "$teacher" ] || { emit skip "no teacher checkpoint (g_throughput_teacher did not run)"; return; }
  throughput distill "$ROOT/inputs/fmnist-distill.toml" "$s" --set data.augment=false --set teacher.checkpoint="$teacher" -- \
    --mode distill --teacher "$teacher" --dim 96 --depth 4 --heads 3 --batch-size 64 \
    --warmup-steps 100 --threads 1
}
check_g_throughput_vits16() {
  local s=50 n=4096 b=256; [ "$DRY" = 1 ] && { s=3; n=64; b=8; }
  if [ "$DRY" != 1 ] && ! have_key run.device; then
    emit skip "vitkd has no run.device key yet"; return   # before writing 600 MB of images
  fi
  GDATA=$RUNS/synthetic224-$n.h5   # kept between runs of check.sh
  if [ ! -s "$GDATA" ]; then
    vk prepare synthetic --out "$GDATA" --train "$n" --test 256 --size 224 --channels 3 --classes 100 ||
      { emit fail "vitkd prepare synthetic failed"; return; }
  fi
  export GDATA
  local m=(--set data.augment=false --set model.image_size=224 --set model.channels=3 --set model.patch=16 --set model.dim=384
           --set model.depth=12 --set model.heads=6 --set model.classes=100 --set data.batch_size="$b"
           --set dist.bucket_mb=25 --set optim.warmup_steps=10)
  throughput vits16 "$ROOT/inputs/fmnist-teacher.toml" "$s" "${m[@]}" -- \
    --mode teacher --image-size 224 --channels 3 --patch 16 --dim 384 --depth 12 --heads 6 \
    --classes 100 --batch-size "$b" --warmup-steps 10 --threads 1
}

export -f have_key devset last_ckpt train1 cmp_json verdict resume_check throughput
export VITKD DATA H5CMP OUT BUILD
export QUICK_S="${QUICK[*]}"

run_check a_info 30 check_a_info
run_check a_bench_gemm 30 check_a_bench_gemm
run_check b_bench_adamw 30 check_b_bench_adamw
run_check c_cuda_vs_cpu 60 check_c_cuda_vs_cpu
run_check d_nccl_vs_mpi 45 check_d_nccl_vs_mpi
run_check e_two_ranks 60 check_e_two_ranks
run_check f_resume_cuda_cpu 75 check_f_resume_cuda_cpu
run_check f_resume_cpu_cuda 75 check_f_resume_cpu_cuda
run_check g_throughput_teacher 90 check_g_throughput_teacher
run_check h_phase_timing 15 check_h_phase_timing
run_check g_throughput_distill 75 check_g_throughput_distill
run_check g_throughput_vits16 120 check_g_throughput_vits16

# ---------------------------------------------------------------------------
# 5. Summary
# ---------------------------------------------------------------------------
"$PYTHON" - "$OUT" "$T0" "$DRY" <<'PY'
import glob, json, os, sys, time
out, t0, dry = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1"
checks = sorted((json.load(open(f)) for f in glob.glob(os.path.join(out, "checks", "*.json"))),
                key=lambda c: (c.get("order", 999), c["name"]))
summary = {
    "mode": "dry-run-cpu" if dry else "gpu",
    "seconds": int(time.time()) - t0,
    "counts": {s: sum(c["status"] == s for c in checks) for s in ("pass", "fail", "skip")},
    "checks": checks,
}
json.dump(summary, open(os.path.join(out, "summary.json"), "w"), indent=2)
print(f"\n=== vitkd GPU check ({summary['mode']}): {summary['counts']} in {summary['seconds']} s ===")
for c in checks:
    print(f"{c['status']:>4}  {c['name']:<22} {c.get('seconds', 0):>4} s  {c['reason']}")
print(f"summary: {os.path.join(out, 'summary.json')}; logs: {os.path.join(out, 'logs')}")
PY
cp -f "$BUILD/CMakeCache.txt" "$OUT/logs/" 2>/dev/null
exit 0
