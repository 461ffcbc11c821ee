#!/usr/bin/env bash
# Fills gpu-carry/ (git-ignored) with what the GPU machine lacks to build and
# run vitkd: Debian 12 .deb files of OpenMPI, parallel HDF5, toml++, Kokkos,
# CLI11 and nlohmann_json (header-only), the image libraries, and their
# runtime dependencies, plus the Fashion-MNIST source files. Nothing is
# installed here; jobs/gpu/check.sh unpacks the .deb files on the GPU machine
# (dpkg -x) into a private prefix.
#
# Runs on Debian 12 as root (apt-get download needs no root, apt-get update
# does). Idempotent: .deb files already present at the candidate version are
# kept, so a second run takes seconds. Fails if gpu-carry/ exceeds the budget
# (CARRY_MAX_MIB, default 60; the GPU machine receives at most 64 MiB of
# ignored folders).
#
# Two roles (column 1 of gpu-carry/manifest.tsv):
#   primary  always used from the unpacked prefix: the libraries vitkd is
#            configured against (MPI, HDF5, Kokkos, toml++, CLI11,
#            nlohmann_json) and OpenMPI's own PMIx;
#   support  runtime libraries of those, and the PNG/JPEG/zlib development
#            files; on the GPU machine each shared library is used only where
#            the system has no library of that soname (check.sh links them
#            into a fallback directory at the end of LD_LIBRARY_PATH).
# Left out on purpose: libsasl2-modules-db and libdb5.3 (SASL plugins that
# libldap loads only to authenticate); the MPI network transports vitkd does not need on one
# node (UCX, libfabric, PSM, verbs; check.sh selects ob1/vader/self), the
# Fortran and C++ HDF5 bindings, trilinos-dev (the rest of Trilinos),
# GoogleTest (check.sh configures with VITKD_GPU_TESTS_ONLY=ON: only the gpu
# tests, which are shell scripts, so no unit-test binary is built there), the
# compilers, documentation, and base packages (libc6, libgcc-s1, libstdc++6)
# that every system that runs PyTorch already has.
set -euo pipefail
cd "$(dirname "$0")/../.."

CARRY=${CARRY:-gpu-carry}
CARRY_MAX_MIB=${CARRY_MAX_MIB:-60}
FMNIST_SRC=${FMNIST_SRC:-/usr/share/datasets/fashion-mnist}

PRIMARY=(
  libopenmpi-dev libopenmpi3 openmpi-bin openmpi-common libpmix2
  libhdf5-openmpi-dev libhdf5-openmpi-103-1
  libtomlplusplus-dev libtomlplusplus3
  libtrilinos-kokkos-dev libtrilinos-kokkos-13.2
  libcli11-dev nlohmann-json3-dev   # header-only, with their CMake packages
)
SUPPORT=(
  # OpenMPI's runtime (libopen-pal, mpirun, the shared-memory transport)
  libhwloc15 libevent-core-2.1-7 libevent-pthreads-2.1-7 libudev1 libnuma1
  libmunge2   # needed by libpmix.so.2, hence by mpirun (pmix ext3x component)
  # HDF5's runtime: szip (libaec) and libcurl with its own dependencies
  # (HDF5 links them for its read-only S3 driver, which vitkd never uses, but
  # the dynamic loader needs them to exist)
  libsz2 libaec0
  libcurl4 libssl3 libnghttp2-14 libidn2-0 librtmp1 libssh2-1 libpsl5
  libgssapi-krb5-2 libkrb5-3 libk5crypto3 libkrb5support0 libkeyutils1
  libldap-2.5-0 libsasl2-2 libbrotli1 libzstd1
  libgnutls30 libhogweed6 libnettle8 libgmp10 libp11-kit0 libffi8
  libtasn1-6 libunistring2 libcom-err2
  # vitkd's CMake requires PNG, JPEG and zlib (headers + the .so to link)
  libpng-dev libpng16-16 libjpeg62-turbo-dev libjpeg62-turbo zlib1g-dev zlib1g
)

log() { printf '[prepare %s] %s\n' "$(date +%H:%M:%S)" "$*"; }

mkdir -p "$CARRY/debs"

# apt-get update once if the package lists are missing or older than a week.
if [ -z "$(find /var/lib/apt/lists -maxdepth 1 -name '*_Packages*' -mtime -7 2>/dev/null | head -1)" ]; then
  log "apt-get update"
  apt-get update -q
fi

# Candidate versions of all packages from one apt-cache call (one call per
# package would take seconds each).
declare -A candidate=()
while read -r pkg ver; do candidate[$pkg]=$ver; done < <(
  apt-cache policy "${PRIMARY[@]}" "${SUPPORT[@]}" |
    awk '/^[^ ].*:$/ {sub(/:$/, ""); p = $0} /^  Candidate:/ {print p, $2}')

download() {  # role pkg
  local role=$1 pkg=$2 ver file
  ver=${candidate[$pkg]:-}
  if [ -z "$ver" ] || [ "$ver" = "(none)" ]; then
    echo "prepare: no candidate version for $pkg" >&2
    return 1
  fi
  # Debian file names encode the epoch's colon as %3a; we keep them as apt
  # writes them and match by package name and version with dpkg-deb.
  for file in "$CARRY/debs/${pkg}_"*.deb; do
    [ -e "$file" ] || continue
    if [ "$(dpkg-deb -f "$file" Version)" = "$ver" ]; then
      echo "$role $file"
      return 0
    fi
    rm -f "$file"   # another version: replace it
  done
  (cd "$CARRY/debs" && apt-get download -q "$pkg=$ver" >/dev/null 2>&1) || {
    echo "prepare: apt-get download $pkg=$ver failed" >&2
    return 1
  }
  for file in "$CARRY/debs/${pkg}_"*.deb; do
    echo "$role $file"
    return 0
  done
  echo "prepare: $pkg downloaded but no file found" >&2
  return 1
}

log "collecting ${#PRIMARY[@]} primary and ${#SUPPORT[@]} support packages into $CARRY/debs"
files=()
{
  for p in "${PRIMARY[@]}"; do download primary "$p"; done
  for p in "${SUPPORT[@]}"; do download support "$p"; done
} > "$CARRY/.list.tmp"

# Remove .deb files that are no longer on either list.
declare -A wanted=()
while read -r _ f; do wanted[$f]=1; files+=("$f"); done < "$CARRY/.list.tmp"
for f in "$CARRY/debs/"*.deb; do
  [ -e "$f" ] || continue
  if [ -z "${wanted[$f]:-}" ]; then log "removing stale $f"; rm -f "$f"; fi
done

# Manifest: role, package, version, bytes, file.
{
  printf 'role\tpackage\tversion\tbytes\tfile\n'
  while read -r role f; do
    printf '%s\t%s\t%s\t%s\t%s\n' "$role" "$(dpkg-deb -f "$f" Package)" \
      "$(dpkg-deb -f "$f" Version)" "$(stat -c %s "$f")" "debs/$(basename "$f")"
  done < "$CARRY/.list.tmp"
} > "$CARRY/manifest.tsv"
rm -f "$CARRY/.list.tmp"

# Fashion-MNIST only when asked (VITKD_GPU_CARRY_FMNIST=1): the four gzip
# files (30 MB; check.sh runs `vitkd prepare fashion-mnist --source` on
# them). By default none: the device checks compare runs with each other and
# rates, never accuracy, so a synthetic set of the same shape serves, and
# the working tree and the carry stay under the device's 64 MiB with room
# (jobs/gpu/preflight.sh).
FMNIST_FILES=()
if [ "${VITKD_GPU_CARRY_FMNIST:-0}" = 1 ]; then
  FMNIST_FILES=(train-images-idx3-ubyte.gz train-labels-idx1-ubyte.gz t10k-images-idx3-ubyte.gz t10k-labels-idx1-ubyte.gz)
  mkdir -p "$CARRY/fashion-mnist"
else
  rm -rf "$CARRY/fashion-mnist"
fi
for f in "${FMNIST_FILES[@]}"; do
  if [ ! -s "$CARRY/fashion-mnist/$f" ]; then
    if [ ! -s "$FMNIST_SRC/$f" ]; then
      echo "prepare: $FMNIST_SRC/$f missing (apt-get install dataset-fashion-mnist, or set FMNIST_SRC)" >&2
      exit 1
    fi
    cp "$FMNIST_SRC/$f" "$CARRY/fashion-mnist/$f"
  fi
  printf 'data\t%s\t-\t%s\tfashion-mnist/%s\n' "$f" "$(stat -c %s "$CARRY/fashion-mnist/$f")" "$f" \
    >> "$CARRY/manifest.tsv"
done

deb_bytes=$(awk -F'\t' 'NR>1 && $1!="data" {s+=$4} END {print s+0}' "$CARRY/manifest.tsv")
data_bytes=$(awk -F'\t' '$1=="data" {s+=$4} END {print s+0}' "$CARRY/manifest.tsv")
total_bytes=$(du -sb "$CARRY" | cut -f1)
mib() { awk -v b="$1" 'BEGIN {printf "%.1f", b/1048576}'; }
log "manifest: $CARRY/manifest.tsv (${#files[@]} packages)"
log "sizes: .deb files $(mib "$deb_bytes") MiB, Fashion-MNIST $(mib "$data_bytes") MiB, $CARRY/ in all $(mib "$total_bytes") MiB (budget $CARRY_MAX_MIB MiB)"
if [ "$total_bytes" -gt $((CARRY_MAX_MIB * 1048576)) ]; then
  echo "prepare: $CARRY/ is $(mib "$total_bytes") MiB, above the $CARRY_MAX_MIB MiB budget" >&2
  echo "prepare: the largest entries:" >&2
  sort -t$'\t' -k4,4nr "$CARRY/manifest.tsv" | head -10 >&2
  exit 1
fi
log "ok: carry $CARRY/ to the GPU machine and run jobs/gpu/check.sh there"
