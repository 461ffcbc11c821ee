#!/usr/bin/env bash
# The rehearsal of the device run: jobs/gpu/check.sh with the carried files
# alone, on this machine, in a private mount namespace (unshare -m; root)
# that hides what a GPU machine is not known to have: ssh and rsh, the
# system's OpenMPI, PMIx, HDF5, Kokkos, toml++ (and their hwloc, libevent,
# munge, szip), Debian's LibTorch, the CUDA toolkit, the system's mpirun and
# compiler wrappers, binutils (objdump, ar), dpkg, the C and C++ compilers,
# CMake and ninja, and the project's build folders. Only gpu-carry/ (the .deb
# files and the prebuilt binaries of jobs/gpu/pack.sh) and the torch of
# $PYTHON (standing in for the device's site-packages) are left to be found.
# There is no GPU here: without --dry-run the GPU checks skip, and a_launch
# (start-up, the MPI launch of 2 ranks, library loading, one CPU training
# step) must pass; with --dry-run every check runs with the CPU standing in
# for cuda (check.sh --dry-run-cpu), from the carried files alone.
#
#   bash jobs/gpu/rehearse.sh                        # exit 0: it would start there
#   bash jobs/gpu/rehearse.sh --dry-run              # the whole dry run, carried files alone
#   bash jobs/gpu/rehearse.sh --dry-run --part=1     # the first device command's checks only
#   bash jobs/gpu/rehearse.sh --without-launcher-fix # OpenMPI as it comes: fails without ssh
#   bash jobs/gpu/rehearse.sh --expect-gpu           # VITKD_EXPECT_GPU=1: must fail here
#
# Environment: PYTHON (default: the Python the prebuilt was built against,
# from its build.json, else the venv of jobs/setup-torch2.sh), CARRY
# (default gpu-carry), OUT (default /tmp/vitkd-rehearsal/out), and the
# variables of check.sh. Exit: check.sh's, or 3 when the namespace cannot be
# made or something meant to be hidden is still found.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
ROOT=$(pwd)
FIX=1 EXPECT=0 DRY_ARG=()
for arg in "$@"; do
  case "$arg" in
    --without-launcher-fix) FIX=0 ;;
    --expect-gpu) EXPECT=1 ;;
    --dry-run) DRY_ARG+=(--dry-run-cpu) ;;
    --part=1|--part=2) DRY_ARG+=("$arg") ;;
    *) echo "rehearse.sh: unknown argument $arg" >&2; exit 2 ;;
  esac
done
CARRY=${CARRY:-$ROOT/gpu-carry}
if [ -z "${PYTHON:-}" ]; then
  PYTHON=$(python3 "$ROOT/jobs/gpu/lib/prebuilt.py" python --carry "$CARRY" 2>/dev/null)
  [ -x "$PYTHON" ] || PYTHON=${VITKD_TORCH2_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/vitkd/torch2-venv}/bin/python
fi
R=${REHEARSAL_DIR:-/tmp/vitkd-rehearsal}
[ -s "$CARRY/prebuilt/build.json" ] || { echo "rehearse.sh: no $CARRY/prebuilt/build.json: run jobs/gpu/pack.sh first" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "rehearse.sh: needs root (unshare -m, mount)" >&2; exit 2; }
rm -rf "$R" && mkdir -p "$R/out"
EMPTY=$R/empty && : > "$EMPTY" && chmod 644 "$EMPTY"   # not executable, not a library

L=/usr/lib/x86_64-linux-gnu
HIDE_DIRS=("$L/openmpi" "$L/pmix2" "$L/hdf5" "$L/mpich" /etc/openmpi /usr/share/openmpi /usr/local/cuda
           /usr/local/cuda-13.0 /usr/local/cuda-13)
for d in "$ROOT"/build*/ /work/main/build*/; do [ -d "$d" ] && HIDE_DIRS+=("${d%/}"); done
HIDE_FILES=()
for f in /usr/bin/{ssh,rsh,scp,slogin,mpirun,mpiexec,orterun,orted,ompi_info,mpicc,mpicxx,h5pcc}* \
         /usr/bin/{objdump,ar,dpkg,dpkg-deb,gcc,g++,cc,c++,cpp,clang,clang++,cmake,ninja} \
         /usr/bin/x86_64-linux-gnu-{objdump,ar,gcc,g++,cpp}* /usr/bin/{gcc,g++,cpp,clang,clang++}-[0-9]* \
         "$L"/lib{mpi,open-rte,open-pal,pmix,hdf5,hwloc,event,munge,sz,aec,trilinos_,kokkos,tomlplusplus,torch,c10,caffe2,ucp,uct,ucs,fabric,psm}*.so*; do
  [ -e "$f" ] && HIDE_FILES+=("$(readlink -f "$f")")
done
printf '%s\n' "${HIDE_DIRS[@]}" > "$R/hide-dirs.txt"
printf '%s\n' "${HIDE_FILES[@]}" | sort -u > "$R/hide-files.txt"
echo "rehearse: hiding $(wc -l < "$R/hide-dirs.txt") folders and $(wc -l < "$R/hide-files.txt") files (lists in $R); launcher fix: $([ "$FIX" = 1 ] && echo on || echo OFF); VITKD_EXPECT_GPU=$EXPECT"

# shellcheck disable=SC2016  # expanded by the inner bash
unshare -m --propagation private bash -c '
  set -u
  R=$1 EMPTY=$2; shift 2
  while read -r d; do [ -d "$d" ] && { mount -t tmpfs -o size=1m,mode=755 none "$d" || exit 3; }; done < "$R/hide-dirs.txt"
  while read -r f; do [ -e "$f" ] && { mount --bind "$EMPTY" "$f" || exit 3; }; done < "$R/hide-files.txt"
  # What must not be found any more: an ssh or rsh to run, a system MPI library to load.
  for b in ssh rsh objdump dpkg cc c++ gcc cmake; do p=$(type -P "$b"); [ -n "$p" ] && [ -x "$p" ] && [ -s "$p" ] && { echo "rehearse: $b still at $p" >&2; exit 3; }; done
  [ -s /usr/lib/x86_64-linux-gnu/libmpi.so.40 ] && { echo "rehearse: the system libmpi is still readable" >&2; exit 3; }
  echo "rehearse: in the namespace: no ssh, rsh, objdump, dpkg, compilers, CMake, system OpenMPI/PMIx/HDF5 or build folders"
  exec "$@"
' rehearse "$R" "$EMPTY" env PYTHON="$PYTHON" CARRY="$CARRY" VITKD_DEPS="$R/deps" WORK="$R/work" RUNS="$R/runs" \
    OUT="${OUT:-$R/out}" VITKD_GPU_LAUNCHER_FIX="$FIX" VITKD_EXPECT_GPU="$EXPECT" bash "$ROOT/jobs/gpu/check.sh" "${DRY_ARG[@]}"
rc=$?
echo "rehearse: check.sh exit $rc"
exit "$rc"
