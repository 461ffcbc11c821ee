#!/usr/bin/env bash
# Fault injection at NP ranks. Each case checks the exit code, the
# message, and that the last good checkpoint survives and resumes:
#   1. a rank killed mid-step: the job ends within 30 s; resume finishes;
#   2. one corrupt (NaN) batch: the step is skipped and counted;
#   3. NaN every step: after train.max_bad_steps a diagnostic checkpoint and a
#      clear stop; checkpoint.h5 untouched;
#   4. a checkpoint write failing halfway: clean stop, previous checkpoint kept;
#   5. a full disk during a checkpoint (ulimit -f): same.
#   faults_e2e.sh NP WORKDIR    (env: VITKD, MPIEXEC, MPIEXEC_NUMPROC_FLAG, SRC, PYTHON)
set -euo pipefail
np=$1
work=$2
rm -rf "$work" && mkdir -p "$work" && cd "$work"
fail() { echo "FAIL: $*"; exit 1; }
# expect RC ARGS...: runs `vitkd ARGS` at np ranks, checks the exit code
# (any non-zero when RC is "nonzero"), leaves the output in last.log.
expect() {
  local want=$1; shift
  set +e; timeout 120 $MPIEXEC $MPIEXEC_NUMPROC_FLAG "$np" $MPIEXEC_PREFLAGS "$VITKD" "$@" > last.log 2>&1
  local rc=$?; set -e
  if [ "$want" = nonzero ]; then [ "$rc" != 0 ] && [ "$rc" != 124 ] || { cat last.log; fail "exit code $rc: $*"; }
  else [ "$rc" = "$want" ] || { cat last.log; fail "exit code $rc, expected $want: $*"; }; fi
}
step_of() { "$PYTHON" -c "import h5py, sys; print(int(h5py.File(sys.argv[1], 'r').attrs['step']))" "$1"; }

"$VITKD" prepare synthetic --out syn.h5 --train 384 --test 128 --size 8 --classes 4 --seed 3 > /dev/null
cat > tiny.toml <<'TOML'
[run]
seed = 5
[data]
path = "syn.h5"
batch_size = 4
[model]
image_size = 8
channels = 1
patch = 4
dim = 16
depth = 1
heads = 2
mlp_ratio = 2.0
classes = 4
[train]
epochs = 1
log_every_steps = 8
mfu_ceiling = 1e11
[optim]
lr = 2e-3
warmup_steps = 5
[checkpoint]
every_steps = 4
TOML
T=(train tiny.toml)
spe=$(( (384 + 4 * np - 1) / (4 * np) ))  # steps in the epoch

# ---- 1. a rank killed mid-step -------------------------------------------------
t0=$(date +%s)
VITKD_TEST_KILL_RANK=1:10 expect nonzero "${T[@]}" --set run.out_dir=kill
dt=$(( $(date +%s) - t0 ))
[ "$dt" -le 30 ] || fail "the job took $dt s to end after a rank died"
[ "$(step_of kill/checkpoint.h5)" = 8 ] || fail "expected the step-8 checkpoint"
expect 0 "${T[@]}" --set run.out_dir=kill
grep -q "resume: from kill/checkpoint.h5" last.log || fail "no resume after the kill"
[ "$(step_of kill/checkpoint.h5)" = "$spe" ] || fail "resumed run did not finish"
echo "OK 1: killed rank -> job ended in $dt s, resume finished"

# ---- 2. one corrupt batch ------------------------------------------------------
VITKD_TEST_CORRUPT_BATCH=6 expect 0 "${T[@]}" --set run.out_dir=nan1
grep -q "step 7: non-finite loss or gradient.*update skipped (1 in a row" last.log || { cat last.log; fail "no skip message"; }
"$PYTHON" -c "import json, math; r = json.load(open('nan1/result.json')); assert r['skipped_steps'] == 1, r['skipped_steps']; assert math.isfinite(r['final_loss'])"
echo "OK 2: a NaN batch is skipped and counted"

# ---- 3. NaN every step -> diagnostic checkpoint and a clear stop ---------------
VITKD_TEST_CORRUPT_BATCH=6:1000 expect 1 "${T[@]}" --set run.out_dir=nanrun --set train.max_bad_steps=3
grep -q "3 consecutive steps had a non-finite loss or gradient (train.max_bad_steps = 3); stopped at step 9 and wrote nanrun/diagnostic-step00000009.h5" last.log \
  || { cat last.log; fail "no max_bad_steps message"; }
[ "$(grep -c 'vitkd: error' last.log)" = 1 ] || fail "the error was printed more than once"
[ -f nanrun/diagnostic-step00000009.h5 ] || fail "no diagnostic checkpoint"
[ "$(step_of nanrun/checkpoint.h5)" = 4 ] || fail "checkpoint.h5 moved past the last good step"
expect 0 "${T[@]}" --set run.out_dir=nanrun
echo "OK 3: persistent NaN -> diagnostic checkpoint, exit 1, resumable"

# ---- 4. a checkpoint write failing halfway ------------------------------------
VITKD_TEST_PREEMPT_AT_STEP=5 expect 75 "${T[@]}" --set run.out_dir=ckfail
cp ckfail/checkpoint.h5 before.h5
t0=$(date +%s)
VITKD_TEST_CHECKPOINT_FAULT=fail:1 expect nonzero "${T[@]}" --set run.out_dir=ckfail
dt=$(( $(date +%s) - t0 ))
grep -q "checkpoint write failed halfway" last.log || { cat last.log; fail "no message"; }
[ "$dt" -le 30 ] || fail "took $dt s"
cmp -s before.h5 ckfail/checkpoint.h5 || fail "the failed write damaged checkpoint.h5"
expect 0 "${T[@]}" --set run.out_dir=ckfail
echo "OK 4: a failed checkpoint write keeps the previous one"

# ---- 5. a full disk during a checkpoint -----------------------------------------
BIG=(train tiny.toml --set model.dim=192 --set model.heads=3 --set model.depth=2)  # a 7 MB checkpoint
VITKD_TEST_PREEMPT_AT_STEP=5 expect 75 "${BIG[@]}" --set run.out_dir=full
cp full/checkpoint.h5 before.h5
size_kb=$(( $(stat -c %s full/checkpoint.h5) / 1024 ))
# Room for the timing log but not for another checkpoint. The limit applies to
# the vitkd processes only (the launcher's own shared-memory files need more).
set +e
timeout 120 $MPIEXEC $MPIEXEC_NUMPROC_FLAG "$np" $MPIEXEC_PREFLAGS \
  bash -c "ulimit -f $((size_kb / 2)); exec \"\$0\" \"\$@\"" "$VITKD" "${BIG[@]}" --set run.out_dir=full > last.log 2>&1
rc=$?
set -e
[ "$rc" != 0 ] && [ "$rc" != 124 ] || { cat last.log; fail "a full disk gave exit code $rc"; }
grep -q "vitkd: error.*HDF5 call failed: H5Dwrite" last.log || { cat last.log; fail "no I/O error message"; }
cmp -s before.h5 full/checkpoint.h5 || fail "the full disk damaged checkpoint.h5"
expect 0 "${BIG[@]}" --set run.out_dir=full
grep -q "resume: from full/checkpoint.h5" last.log || fail "no resume after the full disk"
echo "OK 5: a full disk during a checkpoint keeps the previous one"
echo "OK: fault tests at $np ranks"
