#!/usr/bin/env bash
# Fills gpu-carry/ for the device run: the Debian packages (jobs/gpu/prepare.sh)
# and the prebuilt binaries (gpu-carry/prebuilt/: vitkd, vitkd_h5cmp and
# build.json, jobs/gpu/lib/prebuilt.py), built here against the torch of
# $PYTHON, which must be the device's (jobs/gpu/device.env). jobs/gpu/preflight.sh
# calls it when the carry is missing or stale, with the right venv.
# At run time vitkd loads that torch from the device's own site-packages
# (LD_LIBRARY_PATH, jobs/gpu/lib/deps.sh): nothing of torch is carried.
#
#   PYTHON=~/.cache/vitkd/torch211-venv/bin/python bash jobs/gpu/pack.sh
#   bash jobs/gpu/pack.sh --from build-torch2   # record an existing build (CI's rehearsal)
#
# Builds in BUILD_DIR (default build-gpu-prebuilt; cold: about 5 minutes on
# 2 cores, 2026-12-06) with jobs/gpu/check.sh --build-only; stops when gpu-carry/
# would exceed CARRY_MAX_MIB (default 60; the device takes 64 MiB of carried
# paths in all).
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$(pwd)
FROM=""
case "${1:-}" in --from) FROM=$2 ;; "") ;; *) echo "pack.sh: unknown argument $1" >&2; exit 2 ;; esac
PYTHON=${PYTHON:-python3}
CARRY=${CARRY:-$ROOT/gpu-carry}
CARRY_MAX_MIB=${CARRY_MAX_MIB:-60}
DEPS=${VITKD_DEPS:-/tmp/vitkd-pack-deps}
CARRY=$CARRY bash jobs/gpu/prepare.sh
if [ -z "$FROM" ]; then
  FROM=${BUILD_DIR:-$ROOT/build-gpu-prebuilt}
  CARRY=$CARRY VITKD_DEPS=$DEPS BUILD_DIR=$FROM PYTHON=$PYTHON WORK=${WORK:-/tmp/vitkd-pack-work} \
    bash jobs/gpu/check.sh --build-only
else
  # The carried libraries, unpacked, for the GLIBC versions they need.
  rm -rf "$DEPS" && mkdir -p "$DEPS/primary" "$DEPS/support"
  while IFS=$'\t' read -r role _ _ _ file; do
    case "$role" in primary|support) dpkg -x "$CARRY/$file" "$DEPS/$role" ;; esac
  done < <(tail -n +2 "$CARRY/manifest.tsv")
fi
"$PYTHON" jobs/gpu/lib/prebuilt.py record --build "$FROM" --carry "$CARRY" --deps "$DEPS" --root "$ROOT"
bytes=$(du -sb "$CARRY" | cut -f1)
echo "pack: $CARRY is $(awk -v b="$bytes" 'BEGIN {printf "%.1f", b / 1048576}') MiB (at most $CARRY_MAX_MIB; the device takes 64 MiB of carried paths)"
[ "$bytes" -le $((CARRY_MAX_MIB * 1048576)) ] || { echo "pack: $CARRY is over $CARRY_MAX_MIB MiB" >&2; exit 1; }
