#!/usr/bin/env bash
# The device check on a lent GPU machine: two commands of at most 270 s
# each (docs/gpu.md, "The device run"). Run from the repository root, after
# jobs/gpu/preflight.sh filled and checked gpu-carry/ here:
#
#   OUT=$OUT bash jobs/gpu/check.sh --part=1   # on the GPU machine: launch, cuda vs cpu, B/16 -> S/16 against timm, NCCL
#   OUT=$OUT bash jobs/gpu/check.sh --part=2   # then everything else
#   bash jobs/gpu/check.sh --dry-run-cpu       # anywhere: the CPU stands in for cuda
#   bash jobs/gpu/check.sh --plan --part=1     # the checks, limits and budget only
#   bash jobs/gpu/rehearse.sh                  # this script with only carried files
#
# Steps: (1) the versions of torch (its CUDA, NCCL, C++ ABI), nvcc, the
# compiler and glibc; (2) the binaries: gpu-carry/prebuilt/ when its
# build.json fits this machine's torch, CUDA, glibc and libstdc++ and the
# source tree (jobs/gpu/lib/prebuilt.py), else one line naming both sides
# and exit 2 (with --build: a build here, jobs/gpu/lib/build.sh, which needs
# CMake, a compiler and nvcc); (3) unpack gpu-carry/debs into $VITKD_DEPS
# and set up the relocated OpenMPI (launcher without ssh), PMIx, HDF5,
# Kokkos, ... (jobs/gpu/lib/deps.sh);
# (4) `ldd`: any "not found" stops the run; (5) the plan: every check with
# its time limit and the budget, printed before the first starts; (6) the
# checks in order (tests/gpu/run.sh each, no CTest needed), each under its
# watchdog, a check starting only if its limit fits before the deadline.
# After every check, and at the end, summary.json (jobs/gpu/summary.py),
# report.md (jobs/gpu/report.py) and vitkd-gpu.tar.gz (logs, fragments,
# results) are written anew in $OUT: a command killed at its limit still
# returns what finished. Steps (1) to (4) and the data have timeouts of their
# own (SETUP_MAX_S in all, default 90 s); a prebuilt that does not fit this
# machine is one line and exit 2, never a build here unless --build.
#
# A GPU is expected wherever a /dev/nvidia* device exists (tests/gpu/expect.sh;
# VITKD_EXPECT_GPU=1 forces it, =0 on a GPU machine warns once): no GPU
# visible is then one line first and a failed run, and any check that skips
# or did not run is a fail. The exit status is 0 only when every check that
# started passed and, where a GPU is expected, every check ran.
#
# Options: --part=1|2 (the two device commands, tests/gpu/checks.sh --part);
# --dry-run-cpu; --plan; --only=a_launch,c_cuda_vs_cpu (those checks and
# what they need); --build (build here where the prebuilt does not fit);
# --no-prebuilt (build even where it fits); --build-only (build in
# $BUILD_DIR and stop; jobs/gpu/pack.sh); --skip-build (use $BUILD_DIR as it
# is, no prebuilt).
# Environment: BUILD_MAX_S (the build's limit; default what is left of the
# budget on a GPU machine, an hour for --build-only and the dry run),
# OUT (default ./gpu-out: the three files), WORK (default
# /tmp/vitkd-gpu-work: what the archive holds), RUNS (default
# /tmp/vitkd-gpu-runs: run folders, never packed), VITKD_DEPS (default
# /tmp/vitkd-deps), CARRY (default gpu-carry), BUILD_DIR (default build-gpu;
# dry run build-gpu-dry), JOBS, BUDGET_S (default DEVICE_PART_S of
# jobs/gpu/device.env, 270 s, a part, twice that for both;
# dry run 7200), SETUP_MAX_S (default 90; dry run 900),
# LIMIT_SCALE (default 1; dry run 10), STEPS (default 20; dry run 6),
# PYTHON (default python3: the machine's torch), VITKD_FALLBACK_ALL=1 (every
# carried support library, not only those the system lacks),
# VITKD_GPU_LAUNCHER_FIX=0 (OpenMPI without OMPI_MCA_plm=isolated).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
ROOT=$(pwd)

DRY=0 SKIP_BUILD=0 BUILD_ONLY=0 NO_PREBUILT=0 ALLOW_BUILD=0 PLAN_ONLY=0 ONLY="" PART=""
for arg in "$@"; do
  case "$arg" in
    --dry-run-cpu) DRY=1 ;;
    --skip-build) SKIP_BUILD=1 ;;
    --build) ALLOW_BUILD=1 ;;
    --build-only) BUILD_ONLY=1; NO_PREBUILT=1 ;;
    --no-prebuilt) NO_PREBUILT=1 ;;
    --plan) PLAN_ONLY=1 ;;
    --only=*) ONLY=${arg#--only=} ;;
    --part=1|--part=2) PART=${arg#--part=} ;;
    -h|--help) awk 'NR > 1 && /^#/ {sub(/^# ?/, ""); print; next} NR > 1 {exit}' "$0"; exit 0 ;;
    *) echo "check.sh: unknown argument $arg" >&2; exit 2 ;;
  esac
done
# shellcheck source=tests/gpu/expect.sh
. "$ROOT/tests/gpu/expect.sh"
# shellcheck source=jobs/gpu/device.env
. "$ROOT/jobs/gpu/device.env"   # DEVICE_PART_S: each part's budget
gpu_expect "$DRY"   # EXPECT; one warning line where VITKD_EXPECT_GPU=0 on a GPU machine
export VITKD_GPU_EXPECT_DECIDED=1
STARTUP_S=30 RESERVE_S=15   # planned: set-up before the first check; summary and archive after the last
if [ "$DRY" = 1 ]; then
  STEPS=${STEPS:-6}; LIMIT_SCALE=${LIMIT_SCALE:-10}; BUDGET_S=${BUDGET_S:-7200}; SETUP_MAX_S=${SETUP_MAX_S:-900}
  BUILD=${BUILD_DIR:-$ROOT/build-gpu-dry}
else
  STEPS=${STEPS:-20}; LIMIT_SCALE=${LIMIT_SCALE:-1}; BUDGET_S=${BUDGET_S:-$([ -n "$PART" ] && echo "$DEVICE_PART_S" || echo $((2 * DEVICE_PART_S)))}
  SETUP_MAX_S=${SETUP_MAX_S:-90}
  BUILD=${BUILD_DIR:-$ROOT/build-gpu}
fi
[ "$NO_PREBUILT" = 1 ] && ALLOW_BUILD=1
# A part is its checks (an --only given as well narrows it further).
if [ -n "$PART" ] && [ -z "$ONLY" ]; then ONLY=$(bash "$ROOT/tests/gpu/checks.sh" --part "$PART" | paste -sd, -); fi
T0=$(date +%s)
DEADLINE=$((T0 + BUDGET_S - RESERVE_S))
CHECKS=$(bash "$ROOT/tests/gpu/checks.sh" --list)
selected() { [ -z "$ONLY" ] || grep -qw "$1" <<< "${ONLY//,/ } $NEEDED"; }
NEEDED=""   # what the selected checks need: they run too
while read -r name _ needs; do [ -n "$ONLY" ] && grep -qw "$name" <<< "${ONLY//,/ }" && NEEDED="$NEEDED $needs"; done <<< "$CHECKS"

# plan: the checks with their limits, and the budget they add up to
plan() {
  local name limit needs sum=0
  printf '%-24s %8s  %s\n' check "limit s" "needs"
  while read -r name limit needs; do
    selected "$name" || continue
    printf '%-24s %8d  %s\n' "$name" $((limit * LIMIT_SCALE)) "${needs:+gpu.$needs}"
    sum=$((sum + limit * LIMIT_SCALE))
  done <<< "$CHECKS"
  printf '%-24s %8d\n%-24s %8d\n%-24s %8d  (budget %d s)\n' "(set-up, planned)" "$STARTUP_S" \
    "(summary + archive)" "$RESERVE_S" "planned in all" $((sum + STARTUP_S + RESERVE_S)) "$BUDGET_S"
}
if [ "$PLAN_ONLY" = 1 ]; then plan; exit 0; fi

OUT=${OUT:-$ROOT/gpu-out}
WORK=${WORK:-/tmp/vitkd-gpu-work}
RUNS=${RUNS:-/tmp/vitkd-gpu-runs}
mkdir -p "$OUT" "$RUNS" && OUT=$(cd "$OUT" && pwd)
rm -rf "$WORK" && mkdir -p "$WORK/logs" "$WORK/checks" "$WORK/results" "$WORK/tests"
rm -f "$OUT/summary.json" "$OUT/report.md" "$OUT/vitkd-gpu.tar.gz"
CARRY=${CARRY:-$ROOT/gpu-carry}
DEPS=${VITKD_DEPS:-/tmp/vitkd-deps}
PYTHON=${PYTHON:-python3}
JOBS=${JOBS:-$(nproc --all)}
META=$WORK/meta.tsv   # key<TAB>value lines for summary.json
: > "$META"
meta() { printf '%s\t%s\n' "$1" "$2" >> "$META"; }
log() { printf '[gpu-check %s +%3ds] %s\n' "$(date +%H:%M:%S)" $(($(date +%s) - T0)) "$*" | tee -a "$WORK/progress.log"; }

# write_results [--table]: summary.json, report.md and the archive in $OUT,
# as they stand (after every check, so that a command killed at its limit
# still returns what finished); with --table, the table on stdout. Returns
# summary.py's status (1 when a check failed).
write_results() {
  local quiet=--quiet src
  [ "${1:-}" = --table ] && quiet=""
  timeout 60 "$PYTHON" "$ROOT/jobs/gpu/summary.py" --work "$WORK" --out "$OUT" --expect "$EXPECT" \
    --mode "$([ "$DRY" = 1 ] && echo dry-run-cpu || echo gpu)" --t0 "$T0" --budget "$BUDGET_S" \
    --checks "$CHECKS" --only "${ONLY//,/ } $NEEDED" ${PART:+--part "$PART"} $quiet
  src=$?
  if timeout 60 "$PYTHON" "$ROOT/jobs/gpu/report.py" "$OUT/summary.json" > "$OUT/report.md.new" 2> "$WORK/logs/report.log"; then
    mv -f "$OUT/report.md.new" "$OUT/report.md"
  else
    log "report.py failed (logs/report.log)"
  fi
  cp -f "$BUILD/CMakeCache.txt" "$WORK/logs/" 2>/dev/null
  timeout 60 tar -czf "$OUT/vitkd-gpu.tar.gz.new" -C "$WORK" . 2>/dev/null
  if [ "$(stat -c %s "$OUT/vitkd-gpu.tar.gz.new" 2>/dev/null || echo 0)" -gt $((15 * 1048576)) ]; then   # the device returns files up to 16 MiB
    timeout 60 tar -czf "$OUT/vitkd-gpu.tar.gz.new" -C "$WORK" --exclude=logs/build.log --exclude='logs/*.log.big' .
    log "archive: over 15 MiB, packed again without logs/build.log"
  fi
  mv -f "$OUT/vitkd-gpu.tar.gz.new" "$OUT/vitkd-gpu.tar.gz" 2>/dev/null
  return "$src"
}
# finish RC [FATAL]: the results in $OUT, the table; exit.
finish() {
  local rc=$1
  trap - TERM
  [ -n "${SETUP_WD:-}" ] && kill "$SETUP_WD" 2>/dev/null
  [ -n "${2:-}" ] && meta fatal "$2"
  write_results --table
  local src=$?
  [ "$rc" = 0 ] && rc=$src
  log "out: $(find "$OUT" -maxdepth 1 -type f -printf '%f ')($(du -sh "$OUT" | cut -f1)); exit $rc"
  exit "$rc"
}
# The set-up's backstop: past SETUP_MAX_S the step under way is stopped and
# the run ends with one line (each step also has its own timeout).
SETUP_WD=""
trap 'finish 2 "the set-up did not finish within $SETUP_MAX_S s (versions, carried packages, prebuilt, libraries, data; see progress.log)"' TERM
( sleep "$SETUP_MAX_S"; kill -TERM $$ 2>/dev/null; pkill -TERM -P $$ 2>/dev/null ) > /dev/null 2>&1 &
SETUP_WD=$!

# ---- 1. the versions that decide whether the binaries fit ------------------------
NVCC_BIN=$(command -v nvcc || echo "${CUDA_HOME:-/usr/local/cuda}/bin/nvcc")
# One Python start (torch's import costs seconds): the details into
# python.txt, the one-line summary on stdout.
PYVER=$(timeout 60 "$PYTHON" - "$WORK/python.txt" <<'PY' 2>/dev/null
import importlib, sys
lines, line = [], None
for m in ("torch", "timm", "numpy", "h5py"):
    try:
        mod = importlib.import_module(m)
        lines.append(f"{m} {getattr(mod, '__version__', '?')}")
    except Exception as e:  # noqa: BLE001
        lines.append(f"{m}: not importable ({e.__class__.__name__}: {e})")
try:
    import torch
    try:
        nccl = ".".join(map(str, torch.cuda.nccl.version()))
    except Exception:  # noqa: BLE001  (a CPU-only torch has no NCCL)
        nccl = "none"
    line = f"torch {torch.__version__} (CUDA {torch.version.cuda}, NCCL {nccl}, C++ ABI {int(torch.compiled_with_cxx11_abi())})"
    lines.append(f"torch.cuda.is_available {torch.cuda.is_available()} cuda {torch.version.cuda}")
    if torch.cuda.is_available():
        lines.append(f"device 0: {torch.cuda.get_device_name(0)}")
    lines.append(f"torch cmake prefix {torch.utils.cmake_prefix_path}")
except Exception as e:  # noqa: BLE001
    lines.append(f"torch details unavailable: {e}")
open(sys.argv[1], "w").write("\n".join(lines) + "\n")
print(line or "torch not importable")
PY
)
log "versions: ${PYVER:-$PYTHON failed}; nvcc $("$NVCC_BIN" --version 2>/dev/null | sed -n 's/.*release \([0-9.]*\).*/\1/p'); $(c++ --version 2>/dev/null | head -1); $(ldd --version 2>&1 | head -1)"
meta versions "${PYVER:-$PYTHON failed}"
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
  cat "$WORK/python.txt" 2>/dev/null
} > "$WORK/system.txt" 2>&1
log "system: $(. /etc/os-release 2>/dev/null; echo "${PRETTY_NAME:-unknown OS}"), $(ldd --version 2>&1 | head -1), $(nproc --all) cores (details: $WORK/system.txt)"

meta mode "$([ "$DRY" = 1 ] && echo dry-run-cpu || echo gpu)"
meta host "$(uname -n) $(nproc --all) cores, $(ldd --version 2>&1 | head -1)"
if [ "$EXPECT" = 1 ] && [ "$DRY" != 1 ] && ! gpu_device > /dev/null; then
  log "FAIL: VITKD_EXPECT_GPU=1, but no GPU is visible here (no /dev/nvidia* device): every GPU check will fail as not run"
  meta no_gpu "VITKD_EXPECT_GPU=1, but no /dev/nvidia* device"
fi

# ---- 2. the binaries: prebuilt where they fit (else one line, before any unpacking) ----
USE_PREBUILT=0
if [ "$NO_PREBUILT" != 1 ] && [ "$SKIP_BUILD" != 1 ]; then
  decision=$(timeout 60 "$PYTHON" "$ROOT/jobs/gpu/lib/prebuilt.py" match --carry "$CARRY" --root "$ROOT" 2>&1) ||
    [ -n "$decision" ] || decision=$'stale\tprebuilt.py match failed or timed out'
  log "prebuilt: ${decision#*$'\t'}"
  meta prebuilt "$decision"
  if [ "${decision%%$'\t'*}" = use ]; then USE_PREBUILT=1
  elif [ "$ALLOW_BUILD" != 1 ]; then
    finish 2 "the prebuilt binaries do not fit this machine (${decision#*$'\t'}); run jobs/gpu/preflight.sh where the carry is packed, or pass --build to build here (minutes)"
  fi
fi

# ---- 3. the carried packages; a build where asked ---------------------------------------
# shellcheck source=jobs/gpu/lib/deps.sh
. "$ROOT/jobs/gpu/lib/deps.sh"
meta launcher "OMPI_MCA_plm=${OMPI_MCA_plm:-unset}"
# shellcheck source=jobs/gpu/lib/build.sh
. "$ROOT/jobs/gpu/lib/build.sh"
if [ "$USE_PREBUILT" = 1 ]; then
  VITKD=$CARRY/prebuilt/vitkd H5CMP=$CARRY/prebuilt/vitkd_h5cmp
else
  # A build has a limit of its own (BUILD_MAX_S: what is left of the budget
  # on a GPU machine, an hour elsewhere), outside the set-up's.
  kill "$SETUP_WD" 2>/dev/null; SETUP_WD=""
  if [ "$DRY" = 1 ] || [ "$BUILD_ONLY" = 1 ]; then BUILD_MAX_S=${BUILD_MAX_S:-3600}
  else BUILD_MAX_S=${BUILD_MAX_S:-$((DEADLINE - $(date +%s) > 60 ? DEADLINE - $(date +%s) : 60))}; fi
  gpu_build
  meta build "$([ "$BUILD_OK" = 1 ] && echo ok || echo FAILED) in $BUILD_S s ($BUILD)"
  [ "$BUILD_ONLY" = 1 ] && exit $((BUILD_OK ? 0 : 1))
  [ "$BUILD_OK" = 1 ] || finish 2 "vitkd did not build (logs/configure.log, logs/build.log)"
  VITKD=$BUILD/vitkd H5CMP=$BUILD/tests/gpu/vitkd_h5cmp
fi

# ---- 4. every library found ---------------------------------------------------------------
# Not only "not found": a library that is found but cannot be loaded (ld.so's
# "error while loading shared libraries: ...: file too short", met in the
# rehearsal) makes ldd fail without that phrase.
: > "$WORK/ldd-vitkd.txt"
LDD_OK=1
for b in "$VITKD" "$H5CMP"; do
  echo "--- $b" >> "$WORK/ldd-vitkd.txt"
  timeout 30 ldd "$b" >> "$WORK/ldd-vitkd.txt" 2>&1 || LDD_OK=0
done
if [ "$LDD_OK" = 0 ] || grep -qE 'not found|error while loading' "$WORK/ldd-vitkd.txt"; then
  finish 2 "unresolved libraries: $(grep -E 'not found|error while loading' "$WORK/ldd-vitkd.txt" | tr -s ' \t' ' ' | sort -u | tr '\n' ';')"
fi
HAVE_NCCL=0; grep -q 'libnccl' "$WORK/ldd-vitkd.txt" && HAVE_NCCL=1
log "binaries: $VITKD ($(grep -cE 'libmpi|libhdf5|kokkos|toml' "$WORK/ldd-vitkd.txt") MPI/HDF5/Kokkos/toml++ and $(grep -cE 'libtorch_cuda|libc10_cuda|libcudart|libnccl' "$WORK/ldd-vitkd.txt") CUDA/NCCL libraries, none missing)"
log "libraries: $(awk '/lib(mpi|hdf5_openmpi|torch_cpu|cudart|pmix)\.so/ {print $3}' "$WORK/ldd-vitkd.txt" | sort -u | tr '\n' ' ')"

# ---- 5. data and the plan -------------------------------------------------------------------
DATA=""
if [ -s "$ROOT/data/fmnist.h5" ]; then DATA=$ROOT/data/fmnist.h5
elif [ -d "$CARRY/fashion-mnist" ]; then
  DATA=$RUNS/fmnist.h5
  [ -s "$DATA" ] || timeout 60 "$VITKD" prepare fashion-mnist --source "$CARRY/fashion-mnist" --out "$DATA" \
    > "$WORK/logs/prepare-data.log" 2>&1 || { log "data: prepare FAILED (logs/prepare-data.log): the checks make a synthetic set"; rm -f "$DATA"; DATA=""; }
fi
log "data: ${DATA:-synthetic 28x28 (made by the first check that needs it)}"
# The set-up is over: the checks have watchdogs of their own.
kill "$SETUP_WD" 2>/dev/null; SETUP_WD=""
trap 'meta stopped "stopped (TERM) at +$(($(date +%s) - T0)) s: the checks without a result did not run"; finish 143' TERM
log "plan (limits x $LIMIT_SCALE; a check starts only if its limit fits in what is left; $((DEADLINE - $(date +%s))) s left):"
plan | while IFS= read -r line; do log "  $line"; done

# ---- 6. the checks, in order -----------------------------------------------------------------
export VITKD H5CMP SRC=$ROOT PYTHON MPIEXEC=$BIN/mpirun MPIEXEC_NUMPROC_FLAG=-n VITKD_GPU_HAVE_NCCL=$HAVE_NCCL
export VITKD_GPU_OUT=$WORK VITKD_GPU_RUNS=$RUNS VITKD_GPU_DEADLINE=$DEADLINE VITKD_GPU_DRY_RUN=$DRY
export VITKD_GPU_STEPS=$STEPS VITKD_GPU_PYTHON=$PYTHON VITKD_EXPECT_GPU=$EXPECT
[ -n "$DATA" ] && export VITKD_GPU_DATA=$DATA
status_of() { "$PYTHON" -c 'import json, sys; print(json.load(open(sys.argv[1]))["status"])' "$WORK/checks/$1.json" 2>/dev/null; }
order=0
while read -r name limit needs; do
  order=$((order + 1))
  selected "$name" || continue
  lim=$((limit * LIMIT_SCALE)) missing=""
  for n in $needs; do [ "$(status_of "$n")" = pass ] || missing="$missing gpu.$n"; done
  if [ -n "$missing" ]; then
    printf '{"name": "%s", "status": "skip", "reason": "not run: it needs%s, which did not pass", "numbers": {}, "order": %d, "limit": %d}\n' \
      "$name" "$missing" "$order" "$lim" > "$WORK/checks/$name.json"
    log "gpu.$name: not run (needs$missing)"; continue
  fi
  timeout -k 10 $((lim + 30)) bash "$ROOT/tests/gpu/run.sh" "$name" "$lim" "$order" "$WORK/tests" \
    > "$WORK/logs/run-$name.txt" 2>&1 < /dev/null
  rc=$?
  if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
    printf '{"name": "%s", "status": "fail", "reason": "stopped by the backstop timeout (%d s) past its own watchdog", "numbers": {}, "order": %d, "limit": %d}\n' \
      "$name" $((lim + 30)) "$order" "$lim" > "$WORK/checks/$name.json"
  fi
  log "$(grep -E "^gpu\\.$name: (pass|fail|skip):" "$WORK/logs/run-$name.txt" | tail -1 || echo "gpu.$name: exit $rc")"
  write_results
done <<< "$CHECKS"
finish 0
