#!/usr/bin/env bash
# Installs every Debian 12 package vitkd needs to build, test and run.
# Idempotent: packages already present are skipped by apt. Run as root
# (or with sudo available). Used by the README's two commands and .ci/run.
set -euo pipefail

PKGS=(
  build-essential cmake ninja-build pkg-config git
  clang libclang-rt-14-dev
  libopenmpi-dev openmpi-bin
  libhdf5-openmpi-dev hdf5-tools
  libtorch-dev libopenblas0-openmp
  libtrilinos-kokkos-dev
  libtomlplusplus-dev libcli11-dev nlohmann-json3-dev
  libgtest-dev googletest
  zlib1g-dev libpng-dev libjpeg62-turbo-dev
  dataset-fashion-mnist
  python3 python3-numpy python3-h5py python3-matplotlib python3-torch python3-yaml python3-pil
  strace                                           # tests/e2e/e2e_faults.sh: fsync order of checkpoints
  slurm-wlm munge                                  # the real Slurm test (tests/cluster/slurm_cluster.sh)
  iproute2                                         # the simulated cluster's namespaces and links (tests/cluster/)
  libmpich-dev libhdf5-mpich-dev mpich             # the MPICH lane (jobs/lanes/mpich.sh)
)

# OpenMPI stays the default MPI (mpicc, mpirun, hdf5-mpi.pc) when MPICH is
# installed next to it (hdf5-mpi.pc follows the mpi alternative); the MPICH lane names MPICH's tools by their .mpich names.
pin_openmpi() {
  local sudo=""
  if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
  if [ -x /usr/bin/mpicc.openmpi ] && [ "$(readlink -f /etc/alternatives/mpi 2>/dev/null)" != /usr/bin/mpicc.openmpi ]; then
    $sudo update-alternatives --set mpi /usr/bin/mpicc.openmpi
  fi
  if [ -x /usr/bin/mpirun.openmpi ] && [ "$(readlink -f /etc/alternatives/mpirun 2>/dev/null)" != /usr/bin/mpirun.openmpi ]; then
    $sudo update-alternatives --set mpirun /usr/bin/mpirun.openmpi
  fi
}

missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#PKGS[@]} packages already installed"
  pin_openmpi
  exit 0
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
echo "setup: installing ${#missing[@]} packages: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
pin_openmpi
