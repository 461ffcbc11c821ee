# shellcheck shell=bash
# shellcheck disable=SC2034  # BUILD_OK and BUILD_S are read by check.sh
# Sourced by jobs/gpu/check.sh (after lib/deps.sh): gpu_build configures and
# builds vitkd and vitkd_h5cmp in $BUILD against the Python torch's LibTorch,
# CUDA (nvcc) and the NCCL of the nvidia-nccl wheel, with the carried
# packages, and sets BUILD_OK (1 or 0) and BUILD_S. The fallback of the
# device run (when the prebuilt binaries do not fit the machine's torch, CUDA
# or glibc) and jobs/gpu/pack.sh (the prebuild) both use it. With the tests on
# (VITKD_GPU_TESTS_ONLY: only the gpu.* tests, so no GoogleTest is needed and
# nothing but vitkd and vitkd_h5cmp is compiled). Needs DRY, ROOT, BUILD, OUT,
# JOBS, LIMIT_SCALE, SKIP_BUILD, WORK, PYTHON and what lib/deps.sh set.
gpu_build() {
  local WITH_CUDA=ON TORCH_DIR="" TB CMAKE_ARGS
  if [ "$DRY" = 1 ] && { [ ! -x "$CUDA_HOME/bin/nvcc" ] || [ -z "$NCCL_ROOT" ] || [ -z "$TORCH_PREFIX" ]; }; then
    WITH_CUDA=OFF
    log "WARNING: dry run without CUDA and NCCL (nvcc at $CUDA_HOME/bin: $([ -x "$CUDA_HOME/bin/nvcc" ] && echo yes || echo no), NCCL wheel: ${NCCL_ROOT:-none}, torch CMake package: ${TORCH_PREFIX:-none}): it does not compile what the GPU run compiles"
  fi
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
    if timeout 600 cmake "${CMAKE_ARGS[@]}" > "$WORK/logs/configure.log" 2>&1; then
      log "build: ninja -j$JOBS in $BUILD (at most $BUILD_MAX_S s)"
      if timeout -k 10 "$BUILD_MAX_S" cmake --build "$BUILD" -j "$JOBS" > "$WORK/logs/build.log" 2>&1; then
        BUILD_OK=1
      else
        log "build FAILED (tail of $WORK/logs/build.log):"; tail -20 "$WORK/logs/build.log"
      fi
    else
      log "configure FAILED (tail of $WORK/logs/configure.log):"; tail -30 "$WORK/logs/configure.log"
    fi
  fi
  BUILD_S=$(($(date +%s) - TB))
  # What CMake found: the MPI, HDF5, Kokkos, toml++, CLI11, json, LibTorch it configured against.
  grep -E '^(MPI_C_COMPILER|MPI_CXX_COMPILER|MPI_C_HEADER_DIR|MPI_mpi_LIBRARY|MPIEXEC_EXECUTABLE|HDF5_C_COMPILER_EXECUTABLE|HDF5_C_INCLUDE_DIR|HDF5_C_LIBRARY_hdf5|HDF5_IS_PARALLEL|VITKD_KOKKOS_INCLUDE_DIR|VITKD_KOKKOS_CORE_LIBRARY|tomlplusplus_DIR|CLI11_DIR|nlohmann_json_DIR|Torch_DIR|PNG_LIBRARY_RELEASE|JPEG_LIBRARY_RELEASE|ZLIB_LIBRARY_RELEASE|VITKD_NCCL_LIBRARY|VITKD_NCCL_INCLUDE_DIR|CUDAToolkit_NVCC_EXECUTABLE|Python3_EXECUTABLE)[:=]' \
    "$BUILD/CMakeCache.txt" 2>/dev/null | sed 's/^/  found: /' | tee "$WORK/cmake-found.txt"
  grep -E 'LibTorch|CUDA runtime|NCCL backend|Kokkos:|Found MPI|Found HDF5|GPU checks' "$WORK/logs/configure.log" 2>/dev/null | sed 's/^/  cmake: /'
}
