#!/usr/bin/env bash
# One GPU check (tests/gpu/checks.sh) as a CTest test, gpu.<name>:
#
#   bash tests/gpu/run.sh NAME LIMIT_S ORDER WORKDIR
#
# Exit 0 pass, 1 fail, 77 skip, with one line saying why. In this order:
#  1. skip where no CUDA GPU is visible: no /dev/nvidia* device at all, or
#     else the built vitkd refuses to compute on one (`vitkd bench adamw
#     --device cuda` on 16 elements exits 2: no GPU visible, or a LibTorch
#     without CUDA; its answer is kept for 10 minutes in
#     WORKDIR/probe.txt, so a run of every check asks once); unless
#     VITKD_GPU_DRY_RUN=1, where the CPU stands in for cuda;
#  2. skip when VITKD_GPU_DEADLINE (epoch seconds) is set and LIMIT_S does
#     not fit in what is left before it (a check is never started with a
#     shorter limit, which would report it failed for lack of time);
#  3. run check_NAME in its own process group with a watchdog: at LIMIT_S
#     the check's whole process tree (mpirun and its ranks included, and
#     what the TERM orphans) is stopped, TERM then KILL 5 s later, and the
#     check is a fail.
# Each check writes its fragment $OUT/checks/NAME.json (name, status
# pass|fail|skip, reason, numbers; run.sh adds seconds, exit, order) and its
# log $OUT/logs/NAME.log (printed for CTest at the end).
#
# Environment: VITKD, PYTHON, SRC, H5CMP, MPIEXEC* and VITKD_GPU_HAVE_NCCL
# come from CTest (tests/gpu/CMakeLists.txt). The caller may set:
#   VITKD_GPU_OUT       fragments, logs, results (default WORKDIR/out)
#   VITKD_GPU_RUNS      run folders (default WORKDIR/runs)
#   VITKD_GPU_DATA      a 28x28x1, 10-class dataset (default: SRC/data/fmnist.h5
#                       if there, else a synthetic one made in the run folder)
#   VITKD_GPU_DEADLINE  epoch seconds: the budget of the whole check
#   VITKD_GPU_DRY_RUN=1 the CPU for cuda (few steps; CUDA-only checks skip)
#   VITKD_GPU_STEPS     training steps of c-f (default 20, dry run 6)
#   VITKD_GPU_PYTHON    the Python of the PyTorch baseline (default PYTHON)
#   VITKD_EXPECT_GPU=1  a GPU is expected here (the default wherever a
#                       /dev/nvidia* device exists, tests/gpu/expect.sh; =0
#                       there warns once): every skip, for whatever reason (no
#                       GPU, a feature missing, the budget), is a fail whose
#                       reason begins "did not run:", exit 1
# Checks named a_launch* need no GPU: they run on any machine (the CPU
# start-up, MPI launch and one training step of the carried build).
set -uo pipefail
if [ $# -ne 4 ]; then echo "usage: run.sh NAME LIMIT_S ORDER WORKDIR" >&2; exit 2; fi
NAME=$1 LIMIT=$2 ORDER=$3 WORK=$4
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=${SRC:-$(cd "$HERE/../.." && pwd)}
PYTHON=${VITKD_GPU_PYTHON:-${PYTHON:-python3}}
VITKD=${VITKD:-$ROOT/build/vitkd}
OUT=${VITKD_GPU_OUT:-$WORK/out}
RUNS=${VITKD_GPU_RUNS:-$WORK/runs}
DRY=0
case "${VITKD_GPU_DRY_RUN:-0}" in 1|ON|on|yes|true) DRY=1 ;; esac
if [ "$DRY" = 1 ]; then STEPS=${VITKD_GPU_STEPS:-6}; else STEPS=${VITKD_GPU_STEPS:-20}; fi
HALF=$((STEPS / 2))
CHECK=$NAME
MPIEXEC=${MPIEXEC:-}
mkdir -p "$OUT/checks" "$OUT/logs" "$OUT/results" "$RUNS" || exit 1
FRAG=$OUT/checks/$NAME.json
LOG=$OUT/logs/$NAME.log
rm -f "$FRAG"
START=$(date +%s)
# shellcheck source=tests/gpu/checks.sh
. "$HERE/checks.sh"
declare -F "check_$NAME" > /dev/null || { echo "gpu.$NAME: no check_$NAME in $HERE/checks.sh" >&2; exit 2; }

# finish RC: completes the fragment, prints it in one line, exits with the
# fragment's status (0 pass, 77 skip, 1 fail).
# shellcheck source=tests/gpu/expect.sh
. "$HERE/expect.sh"
gpu_expect "$DRY"   # a GPU machine expects its GPU even where VITKD_EXPECT_GPU is unset
finish() {
  local rc=$1 line
  line=$("$PYTHON" - "$FRAG" "$(($(date +%s) - START))" "$rc" "$ORDER" "$LIMIT" "$EXPECT" <<'PY'
import json, sys
p, seconds, rc, order, limit, expect = sys.argv[1], *map(int, sys.argv[2:])
d = json.load(open(p))
if expect and d["status"] == "skip":  # no false greens where a GPU is expected
    d.update(status="fail", reason="did not run: " + d["reason"] + " (VITKD_EXPECT_GPU=1)")
d.update(seconds=seconds, exit=rc, order=order, limit=limit)
json.dump(d, open(p, "w"))
print(d["status"] + "\t" + d["reason"])
PY
) || line=$'fail\tthe fragment could not be completed'
  echo "gpu.$NAME: ${line%%$'\t'*}: ${line#*$'\t'} ($(($(date +%s) - START)) s; $FRAG)"
  case "${line%%$'\t'*}" in pass) exit 0 ;; skip) exit 77 ;; *) exit 1 ;; esac
}
# skip_now REASON: the fragment and the line in one Python start (the CPU
# suite runs every gpu.* test only to see it skip).
skip_now() {
  if [ "$EXPECT" = 1 ]; then emit skip "$1"; finish 1; fi
  "$PYTHON" -c 'import json, sys
p, n, r, o, l, s = sys.argv[1:]
json.dump({"name": n, "status": "skip", "reason": r, "numbers": {}, "seconds": int(s), "exit": 77,
           "order": int(o), "limit": int(l)}, open(p, "w"))' "$FRAG" "$NAME" "$1" "$ORDER" "$LIMIT" "$(($(date +%s) - START))"
  echo "gpu.$NAME: skip: $1"
  exit 77
}

# ---- 1. a CUDA GPU, as the built vitkd sees it -------------------------------
[ -x "$VITKD" ] || { emit fail "no vitkd at $VITKD"; finish 1; }
# A vitkd that cannot list its keys is broken, not lacking a feature: every
# "feature missing" skip below would otherwise hide it.
# Kept in WORKDIR/keys.txt for this binary (one vitkd start per run, not per check).
keys_file=$WORK/keys.txt key="$(stat -c '%n %Y %s' "$VITKD")"
if [ ! -s "$keys_file" ] || [ "$(head -1 "$keys_file")" != "$key" ]; then
  { echo "$key"; "$VITKD" keys 2>/dev/null | awk '{print $1}'; } > "$keys_file"
fi
VITKD_KEYS=$(tail -n +2 "$keys_file")
if ! grep -qx run.device <<< "$VITKD_KEYS"; then
  rm -f "$keys_file"
  why=$("$VITKD" keys 2>&1 | grep -m1 -E 'plm_rsh_agent:|error while loading|ORTE_ERROR_LOG|[Ee]rror' || "$VITKD" keys 2>&1 | tail -1)
  emit fail "vitkd cannot start or lists no run.device (vitkd keys: ${why:0:240})"; finish 1
fi
NEEDS_GPU=1
case "$NAME" in a_launch*) NEEDS_GPU=0 ;; esac
if [ "$DRY" != 1 ] && [ "$NEEDS_GPU" = 1 ]; then
  if ! gpu_device > /dev/null; then
    skip_now "no CUDA GPU visible (no /dev/nvidia* device; VITKD_GPU_DRY_RUN=1 runs the checks on the CPU)"
  fi
  probe=$WORK/probe.txt
  key="$(stat -c '%n %Y %s' "$VITKD") CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES-unset}"
  if [ ! -f "$probe" ] || [ "$(head -1 "$probe")" != "$key" ] ||
     [ $(($(date +%s) - $(stat -c %Y "$probe"))) -gt 600 ]; then
    # Exit 2 is vitkd's one-line user error ("run.device = \"cuda\", but no
    # CUDA GPU is visible ..."); any other failure on a machine with a GPU is
    # left to the checks to report.
    answer=$("$VITKD" bench adamw --device cuda --elements 16 --steps 1 2>&1)
    if [ $? = 2 ]; then
      printf '%s\n%s\n' "$key" "$(grep -m1 'error' <<< "$answer" || echo "vitkd bench adamw --device cuda: exit 2")" > "$probe"
    else
      printf '%s\nvisible\n' "$key" > "$probe"
    fi
  fi
  seen=$(sed -n 2p "$probe")
  [ "$seen" = visible ] || skip_now "no CUDA GPU for vitkd: ${seen#vitkd: error: }"
fi

# ---- 2. the budget ----------------------------------------------------------------
if [ -n "${VITKD_GPU_DEADLINE:-}" ]; then
  left=$((VITKD_GPU_DEADLINE - $(date +%s) - 5))
  [ "$LIMIT" -le "$left" ] ||
    skip_now "its time limit of $LIMIT s does not fit in the $((left < 0 ? 0 : left)) s left before VITKD_GPU_DEADLINE"
fi

# ---- 3. the check, under its watchdog ---------------------------------------------
MPI_BIND=""   # threads of two ranks on all cores
if [ -n "$MPIEXEC" ]; then
  case "$("$MPIEXEC" --version 2>&1)" in
    *"Open MPI"*|*OpenRTE*) MPI_BIND="--bind-to none" ;;
    *HYDRA*) MPI_BIND="-bind-to none" ;;
  esac
fi
case "$NAME" in
  a_info|a_bench_*|b_*|h_*|i_*|g_distill_*|g_vits16) DATA=${VITKD_GPU_DATA:-} ;;   # no 28x28 data needed
  *)
    DATA=${VITKD_GPU_DATA:-}
    [ -z "$DATA" ] && [ -s "$ROOT/data/fmnist.h5" ] && DATA=$ROOT/data/fmnist.h5
    if [ -z "$DATA" ]; then
      # Same shape as Fashion-MNIST: the configurations of inputs/ apply.
      DATA=$RUNS/synthetic28.h5
      [ -s "$DATA" ] || "$VITKD" prepare synthetic --out "$DATA" --train 6000 --test 1000 --size 28 \
        --channels 1 --classes 10 > "$RUNS/synthetic28.log" 2>&1 ||
        { emit fail "vitkd prepare synthetic failed ($RUNS/synthetic28.log)"; finish 1; }
    fi ;;
esac
export VITKD PYTHON ROOT OUT RUNS DATA H5CMP STEPS HALF DRY CHECK MPIEXEC MPI_BIND VITKD_KEYS

# The check runs in its own process group, and stop_tree stops that group and every process below the check, by process
# id: TERM, then KILL 5 s later to each of them still there (recorded with
# its start time, so that a reused id is left alone), including those the
# TERM orphaned (a vitkd finishing its step on TERM outlives its shell).
descendants() {  # pid: every process below it, from /proc's children lists
  local c
  # shellcheck disable=SC2013  # the children lists hold process ids separated by spaces
  for c in $(cat /proc/"$1"/task/*/children 2>/dev/null); do echo "$c"; descendants "$c"; done
}
started() { awk '{print $22}' /proc/"$1"/stat 2>/dev/null; }
stop_tree() {  # pid
  local pid=$1 p procs=() seen
  for p in "$pid" $(descendants "$pid"); do procs+=("$p:$(started "$p")"); done
  kill -TERM -- "-$pid" 2>/dev/null
  for p in "${procs[@]}"; do kill -TERM "${p%%:*}" 2>/dev/null; done
  sleep 5
  for p in $(descendants "$pid"); do procs+=("$p:$(started "$p")"); done
  kill -KILL -- "-$pid" 2>/dev/null
  for p in "${procs[@]}"; do
    seen=$(started "${p%%:*}")
    [ -n "$seen" ] && [ "$seen" = "${p#*:}" ] && kill -KILL "${p%%:*}" 2>/dev/null
  done
}

echo "gpu.$NAME: limit $LIMIT s, $([ "$DRY" = 1 ] && echo "dry run (cpu for cuda)" || echo cuda), log $LOG"
# setsid: the check's bash leads a process group of its own (its pid), which
# its children share (job control stays off inside it).
# shellcheck disable=SC2016  # expanded by the inner bash
setsid bash -c '. "$1" && "check_$2"' check "$HERE/checks.sh" "$NAME" > "$LOG" 2>&1 < /dev/null &
pid=$!
# Once the watchdog has begun (its mark file), it is left to finish: the
# check's bash ends at the TERM, its children may not.
# A check that ended first leaves its done mark before the watchdog is
# stopped, so that a watchdog woken by the end of its sleep stands down
# instead of reporting a time-out.
STOPPING=$WORK/.$NAME.stopping DONE=$WORK/.$NAME.done
rm -f "$STOPPING" "$DONE"
( sleep "$LIMIT"; [ -e "$DONE" ] && exit 0; : > "$STOPPING"; stop_tree "$pid" ) > /dev/null 2>&1 &
watchdog=$!
kill_watchdog() {
  local p below
  below=$(descendants "$watchdog")
  for p in "$watchdog" $below; do kill -TERM "$p" 2>/dev/null; done
}
# CTest's own timeout (or ^C) ends the check's tree too.
trap '[ -e "$STOPPING" ] || kill_watchdog; stop_tree "$pid"; exit 1' TERM INT
wait "$pid"; rc=$?
: > "$DONE"
[ -e "$STOPPING" ] || kill_watchdog
wait "$watchdog" 2>/dev/null
rm -f "$DONE"
trap - TERM INT
cat "$LOG"
if [ -e "$STOPPING" ]; then
  rm -f "$STOPPING" "$FRAG"   # a fragment written on the way down does not count
  emit fail "time limit of $LIMIT s reached (the check's processes were stopped)"
elif [ ! -s "$FRAG" ]; then
  emit fail "the check ended (exit $rc) without a result; see $LOG"
fi
finish "$rc"
