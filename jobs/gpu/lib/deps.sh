# shellcheck shell=bash
# shellcheck disable=SC2012,SC2153  # ls on our own file names; ROOT comes from check.sh
# Sourced by jobs/gpu/check.sh: unpacks the carried Debian packages
# (gpu-carry/manifest.tsv, filled by jobs/gpu/prepare.sh) into $DEPS and sets
# up the environment that makes them usable from there: the relocated
# OpenMPI (OPAL_*), its PMIx (PMIX_*), the launcher without ssh, the wrapper
# compilers and h5pcc, the fallback library folder, the torch, NCCL, cuDNN
# and CUDA library folders, LD_LIBRARY_PATH. Needs CARRY, DEPS, WORK, PYTHON,
# ROOT and log(). Sets P, S, PL, BIN, MPI_LIBDIR, TORCH_PREFIX, TORCH_LIB,
# NCCL_ROOT, CUDA_HOME.
#
# The launcher: OpenMPI 4.1 starts even local processes through its rsh/ssh
# component, which refuses to start when no ssh or rsh binary exists
# (open-mpi/ompi#7330, #12386), for mpirun and for a singleton (a vitkd
# started without mpirun forks an orted that selects a launcher too).
# OMPI_MCA_plm=isolated selects the component that starts processes on this
# node only, with no agent (VITKD_GPU_LAUNCHER_FIX=0 leaves it out: the
# rehearsal shows that the run then fails where ssh is missing).

# unpack_deb FILE DEST: dpkg -x, else ar + tar, else Python (ar is simple and
# Debian 12's data.tar.xz is read by tarfile), for a machine with neither.
# A tool counts only where it runs (`command -v` also names a file that is
# there but cannot be executed, as in the rehearsal).
runs() { "$1" --version > /dev/null 2>&1; }
unpack_deb() {
  if runs dpkg; then
    dpkg -x "$1" "$2"
  elif runs ar; then
    local tmp data rc
    tmp=$(mktemp -d)
    (cd "$tmp" && ar x "$1") || return 1
    data=$(ls "$tmp"/data.tar.* 2>/dev/null | head -1)
    case "$data" in
      *.xz) tar -xJf "$data" -C "$2" ;;
      *.zst) zstd -dc "$data" | tar -x -C "$2" ;;
      *.gz) tar -xzf "$data" -C "$2" ;;
      *) tar -xf "$data" -C "$2" ;;
    esac
    rc=$?
    rm -rf "$tmp"
    return $rc
  else
    "$PYTHON" - "$1" "$2" <<'PY'
import io, sys, tarfile
blob = open(sys.argv[1], "rb").read()
assert blob[:8] == b"!<arch>\n", "not an ar archive"
pos = 8
while pos < len(blob):
    name, size = blob[pos:pos + 16].decode().strip().rstrip("/"), int(blob[pos + 48:pos + 58])
    if name.startswith("data.tar"):
        tarfile.open(fileobj=io.BytesIO(blob[pos + 60:pos + 60 + size])).extractall(sys.argv[2])
        break
    pos += 60 + size + (size & 1)
else:
    sys.exit("no data.tar member")
PY
  fi
}

if [ ! -s "$CARRY/manifest.tsv" ]; then
  finish 2 "$CARRY/manifest.tsv missing: run jobs/gpu/prepare.sh on a Debian 12 machine first"
fi

STAMP="$DEPS/.manifest.sha256"
if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$(sha256sum < "$CARRY/manifest.tsv")" ]; then
  log "deps: $DEPS already unpacked from this manifest"
else
  log "deps: unpacking $(($(wc -l < "$CARRY/manifest.tsv") - 1)) entries of $CARRY/manifest.tsv into $DEPS"
  rm -rf "$DEPS"
  mkdir -p "$DEPS/primary" "$DEPS/support"
  while IFS=$'\t' read -r role pkg _ _ file; do
    case "$role" in primary|support) ;; *) continue ;; esac
    unpack_deb "$CARRY/$file" "$DEPS/$role" || finish 2 "cannot unpack $file ($pkg)"
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
# Debian 12's libpmix 4.2 reads PMIX_PREFIX and the PMIX_*DIR variables
# below (its installdirs "env" component; later PMIx versions also read
# PMIX_INSTALL_PREFIX, set for them).
export PMIX_PREFIX=$PL/pmix2
export PMIX_INSTALL_PREFIX=$PL/pmix2
export PMIX_EXEC_PREFIX=$PL/pmix2
export PMIX_BINDIR=$P/usr/bin
export PMIX_LIBDIR=$PL/pmix2/lib
export PMIX_PKGLIBDIR=$PL/pmix2/lib/pmix
export PMIX_DATADIR=$PL/pmix2/share
export PMIX_PKGDATADIR=$PL/pmix2/share/pmix
export PMIX_SYSCONFDIR=$P/etc/openmpi
export PMIX_MCA_mca_base_component_path=$PL/pmix2/lib/pmix
if [ "${VITKD_GPU_LAUNCHER_FIX:-1}" = 1 ]; then
  export OMPI_MCA_plm=isolated
else
  unset OMPI_MCA_plm
  log "launcher: OMPI_MCA_plm not set (VITKD_GPU_LAUNCHER_FIX=0): OpenMPI needs ssh or rsh to start"
fi
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
# The sonames come from the files' ELF headers (prebuilt.py sonames, one
# Python start for all): the device need not have objdump.
while IFS=$'\t' read -r f so; do
  [ -n "$so" ] || continue
  [ -e "$FALLBACK/$so" ] && continue
  # The system's copy counts only where the file ld.so.cache names is there
  # and not empty (a stale cache, or one the rehearsal hid).
  sys_file=$(ldconfig -p 2>/dev/null | awk -v so="$so" '$1 == so && /x86-64/ {print $NF; exit}')
  if [ "${VITKD_FALLBACK_ALL:-0}" = 1 ] || ! grep -qxF "$so" <<< "$system_sonames" || [ ! -s "$sys_file" ]; then
    ln -sfn "$(readlink -f "$f")" "$FALLBACK/$so"
    linked+=("$so")
  fi
done < <(find "$S/lib/x86_64-linux-gnu" "$S/usr/lib/x86_64-linux-gnu" -maxdepth 1 -name 'lib*.so.*' 2>/dev/null | sort |
         timeout 60 "$PYTHON" "$ROOT/jobs/gpu/lib/prebuilt.py" sonames)
log "deps: ${#linked[@]} carried libraries used as fallbacks: ${linked[*]:-none}"

# LibTorch of the Python torch (the GPU machine); Debian's system LibTorch
# when that Python torch has no CMake package (the dry run here).
# One Python start for every fact about torch and the wheels (an import of
# torch takes seconds of the device's budget).
TORCH_PREFIX="" TORCH_LIB="" TORCH_ABI="" TORCH_VERSION="" NCCL_WHEEL="" CUDNN_WHEEL=""
eval "$(timeout 60 "$PYTHON" - <<'PY' 2>/dev/null
import os, shlex
def say(k, v):
    print(f"{k}={shlex.quote(str(v))}")
try:
    import torch
    p = torch.utils.cmake_prefix_path
    say("TORCH_PREFIX", p if os.path.isfile(os.path.join(p, "Torch", "TorchConfig.cmake")) else "")
    say("TORCH_LIB", os.path.join(os.path.dirname(torch.__file__), "lib"))
    say("TORCH_ABI", int(torch._C._GLIBCXX_USE_CXX11_ABI))
    say("TORCH_VERSION", torch.__version__)
except Exception:
    pass
for name, key in (("nccl", "NCCL_WHEEL"), ("cudnn", "CUDNN_WHEEL")):
    try:
        mod = __import__("nvidia." + name, fromlist=["x"])
        say(key, list(mod.__path__)[0])
    except Exception:
        import site
        for d in site.getsitepackages():
            if os.path.isdir(os.path.join(d, "nvidia", name)):
                say(key, os.path.join(d, "nvidia", name))
                break
PY
)"
if [ -n "$TORCH_PREFIX" ]; then
  log "torch: $TORCH_VERSION at $TORCH_PREFIX, _GLIBCXX_USE_CXX11_ABI=$TORCH_ABI"
  if [ "$TORCH_ABI" != 1 ]; then
    # toml++ and Kokkos from Debian are C++ libraries built with the new ABI
    # (std::__cxx11::basic_string in their interfaces); HDF5 and MPI are C.
    log "WARNING: this torch uses the pre-C++11 ABI: linking Debian's libtomlplusplus and libtrilinos_kokkoscore will likely fail (undefined std::string symbols)"
  fi
else
  log "torch: $PYTHON's torch has no CMake package; using the system LibTorch"
fi

# NCCL of the nvidia-nccl wheel: headers in nvidia/nccl/include, the library
# as libnccl.so.2 only; cmake/backends/nccl.cmake looks for NCCL_ROOT/{include,lib}/
# nccl.h and libnccl.so, so NCCL_ROOT is a scratch folder of links.
NCCL_ROOT=""
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
} > "$WORK/env.txt" 2>&1
log "mpi: $(mpicc --showme 2>&1 | head -c 300)"
if ! grep -q "^$P" <<< "$(mpicc --showme:incdirs 2>/dev/null)"; then
  finish 2 "mpicc does not point into $P (see env.txt)"
fi


