#!/usr/bin/env bash
# The device run's dry run inside another distribution's root file system:
# Debian 13 (glibc 2.41, Python 3.13) made by debootstrap, minbase: no ssh,
# MPI, binutils, compilers or procps, nothing of Debian 12's. It catches what
# the carry assumes of Debian 12 (a glibc symbol, a library the system is
# taken to have, a tool). Only the repository (with gpu-carry/) and the
# venv of $PYTHON (its interpreter and standard library bound in from here,
# standing in for the device's Python) come from this machine.
#
#   bash jobs/gpu/rehearse_rootfs.sh              # both parts of the dry run
#   bash jobs/gpu/rehearse_rootfs.sh --part=1     # the first command's checks
#
# Root (debootstrap, chroot, unshare -m). ROOTFS (default
# ~/.cache/vitkd/rootfs-trixie; made once, about 90 s and 100 MB from
# Debian's mirror), SUITE (default trixie), PYTHON (default: the Python in
# gpu-carry/prebuilt/build.json), OUT (default /tmp/vitkd-rootfs-out).
# Exit: check.sh's, 2 for a bad argument or a missing tool.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
ROOT=$(pwd)
ARGS=()
for arg in "$@"; do
  case "$arg" in
    --part=1|--part=2) ARGS+=("$arg") ;;
    *) echo "rehearse_rootfs.sh: unknown argument $arg" >&2; exit 2 ;;
  esac
done
[ "$(id -u)" = 0 ] || { echo "rehearse_rootfs.sh: needs root (debootstrap, chroot)" >&2; exit 2; }
SUITE=${SUITE:-trixie}
FS=${ROOTFS:-${XDG_CACHE_HOME:-$HOME/.cache}/vitkd/rootfs-$SUITE}
OUT=${OUT:-/tmp/vitkd-rootfs-out}
CARRY=$ROOT/gpu-carry
if [ -z "${PYTHON:-}" ]; then
  PYTHON=$(python3 "$ROOT/jobs/gpu/lib/prebuilt.py" python --carry "$CARRY" 2>/dev/null)
fi
[ -x "${PYTHON:-}" ] || { echo "rehearse_rootfs.sh: no Python with the device's torch (PYTHON, or gpu-carry/prebuilt/build.json): run jobs/gpu/preflight.sh first" >&2; exit 2; }
if [ ! -x "$FS/usr/bin/python3" ]; then
  command -v debootstrap > /dev/null || { echo "rehearse_rootfs.sh: no debootstrap (apt-get install debootstrap)" >&2; exit 2; }
  echo "rehearse_rootfs: making $FS (debootstrap --variant=minbase $SUITE)"
  rm -rf "$FS"
  debootstrap --variant=minbase --include=python3,ca-certificates "$SUITE" "$FS" http://deb.debian.org/debian \
    > "$FS.log" 2>&1 || { echo "rehearse_rootfs.sh: debootstrap failed ($FS.log)" >&2; exit 2; }
fi
# The venv as a path of its own inside, its interpreter and standard library
# bound in from here (the venv's python links name the host's interpreter).
VENV=$(cd "$(dirname "$PYTHON")/.." && pwd)
INTERP=$(readlink -f "$PYTHON")
STDLIB=$("$PYTHON" -c 'import sysconfig; print(sysconfig.get_paths()["stdlib"])')
BIN=$(mktemp -d)
for n in python python3 "$(basename "$INTERP")"; do ln -sfn "$INTERP" "$BIN/$n"; done
mkdir -p "$FS$ROOT" "$FS$VENV" "$FS$STDLIB" "$FS/dev/shm" "$(dirname "$FS$INTERP")"
[ -e "$FS$INTERP" ] || : > "$FS$INTERP"
rm -rf "$OUT"
# shellcheck disable=SC1091  # the root file system's own os-release
echo "rehearse_rootfs: $(. "$FS/etc/os-release"; echo "$PRETTY_NAME"), $(chroot "$FS" ldd --version | head -1); the venv $VENV ($INTERP)"
# shellcheck disable=SC2016  # expanded by the inner bash
unshare -m --propagation private bash -c '
  set -e
  FS=$1 ROOT=$2 VENV=$3 INTERP=$4 STDLIB=$5 BIN=$6 OUT=$7; shift 7
  mount --bind "$ROOT" "$FS$ROOT"
  mount --bind "$VENV" "$FS$VENV"
  mount --bind "$BIN" "$FS$VENV/bin"
  mount --bind "$INTERP" "$FS$INTERP"
  mount --bind "$STDLIB" "$FS$STDLIB"
  mount -t proc proc "$FS/proc"
  mount --bind /dev "$FS/dev"
  mount -t tmpfs -o size=2g tmpfs "$FS/dev/shm"
  mount -t tmpfs -o size=4g tmpfs "$FS/tmp"
  set +e
  chroot "$FS" env -i PATH=/usr/local/bin:/usr/bin:/bin HOME=/root \
    bash -c "cd \"\$1\" && shift && PYTHON=\"\$1\" OUT=/tmp/out bash jobs/gpu/check.sh --dry-run-cpu \"\${@:2}\"; rc=\$?; exit \$rc" \
    chroot "$ROOT" "$VENV/bin/python" "$@"
  rc=$?
  mkdir -p "$OUT" && cp -r "$FS/tmp/out/." "$OUT/" 2>/dev/null
  exit $rc
' rootfs "$FS" "$ROOT" "$VENV" "$INTERP" "$STDLIB" "$BIN" "$OUT" "${ARGS[@]}"
rc=$?
rm -rf "$BIN"
echo "rehearse_rootfs: check.sh exit $rc; results in $OUT"
exit "$rc"
