#!/usr/bin/env bash
# Checkpoint and resume at NP ranks:
#   1. bit-exact resume: N steps in one run == k steps, preemption (exit 75),
#      N-k more; with sifting (ce), and distilling with kd sifting (pooled
#      teacher logits), so the sift history and sample pool are covered, and
#      distilling with scope "teacher" sifting (history and kept count);
#   2. resharded resume: written at another rank count, resumed at NP;
#   3. atomicity: a rank SIGKILLed halfway through a checkpoint write leaves
#      the previous checkpoint loadable, and resuming from it is still exact;
#   4. SIGUSR1 to mpirun: checkpoint and exit 75, then resume to the end;
#   5. a truncated checkpoint.h5 with resume = "auto" falls back to the
#      previous good one and says so; checkpoint.keep is honoured;
#   6. a checkpoint of another model shape is refused with exit 2.
#   resume_e2e.sh NP WORKDIR    (env: VITKD, MPIEXEC, MPIEXEC_NUMPROC_FLAG, SRC, PYTHON)
set -euo pipefail
np=$1
work=$2
rm -rf "$work" && mkdir -p "$work" && cd "$work"
mpi() { local n=$1; shift; timeout 120 $MPIEXEC $MPIEXEC_NUMPROC_FLAG "$n" $MPIEXEC_PREFLAGS "$VITKD" "$@"; }
cmp_ckpt() { "$PYTHON" "$SRC/tests/compare_checkpoints.py" "$@"; }
fail() { echo "FAIL: $*"; exit 1; }
# Runs at np ranks and checks the exit code: expect RC ARGS...
expect() { local want=$1; shift; set +e; mpi "$np" "$@" > last.log 2>&1; local rc=$?; set -e
  [ "$rc" = "$want" ] || { cat last.log; fail "exit code $rc, expected $want: $*"; }; }

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
epochs = 2
log_every_steps = 8
mfu_ceiling = 1e11
timing_every_steps = 5
[optim]
lr = 2e-3
warmup_steps = 5
[checkpoint]
every_steps = 0
TOML
G=12  # global batch: 4 x 3 ranks, 6 x 2 ranks
B=$((G / np))
SIFT=(--set sift.enabled=true --set sift.delay=5 --set sift.history=64)
T=(train tiny.toml --set data.batch_size=$B "${SIFT[@]}")

# ---- 1. bit-exact resume ------------------------------------------------------
expect 0 "${T[@]}" --set run.out_dir=full
VITKD_TEST_PREEMPT_AT_STEP=20 expect 75 "${T[@]}" --set run.out_dir=cut
grep -q "exiting with code 75" last.log || fail "no preemption message"
expect 0 "${T[@]}" --set run.out_dir=cut
grep -q "resume: from cut/checkpoint.h5" last.log || fail "did not resume"
cmp_ckpt full/checkpoint.h5 cut/checkpoint.h5 --exact
"$PYTHON" - <<'PY'
import h5py, json
a, b = json.load(open("full/result.json")), json.load(open("cut/result.json"))
for k in ("steps", "samples_seen", "samples_trained", "test_top1", "kept_fraction"):
    assert a[k] == b[k], (k, a[k], b[k])
with h5py.File("cut/timing.h5", "r") as f:  # the resumed run appended, without duplicate steps
    s = f["metrics/step"][()]
    assert list(s) == list(range(1, a["steps"] + 1)), s
PY
# FULL CUT ARGS...: one run in FULL, and in CUT a run preempted after step 17
# and resumed; the final checkpoints must be bit-identical.
preempted_equals_full() {
  local full=$1 cut=$2
  shift 2
  expect 0 "$@" --set run.out_dir="$full"
  VITKD_TEST_PREEMPT_AT_STEP=17 expect 75 "$@" --set run.out_dir="$cut"
  expect 0 "$@" --set run.out_dir="$cut"
  cmp_ckpt "$full/checkpoint.h5" "$cut/checkpoint.h5" --exact
}
D=(train tiny.toml --set data.batch_size=$B "${SIFT[@]}" --set run.mode=distill
   --set teacher.checkpoint=full/checkpoint.h5 --set model.dim=8)
# distillation with kd sifting: the pool carries teacher logits across the stop
preempted_equals_full dfull dcut "${D[@]}" --set sift.criterion=kd
# distillation with scope "teacher" sifting: the history and the kept count carry over
preempted_equals_full tfull tcut "${D[@]}" --set sift.scope=teacher
"$PYTHON" - <<'PY'
import json
a, b = json.load(open("tfull/result.json")), json.load(open("tcut/result.json"))
for k in ("steps", "samples_seen", "samples_trained", "samples_kept", "teacher_forwards", "kept_fraction"):
    assert a[k] == b[k], (k, a[k], b[k])
assert a["samples_kept"] < a["samples_seen"] == a["samples_trained"], a
PY
# vitkd inspect summarises the checkpoint and the appended timing log (the
# history holds sift.history losses besides the current global batch)
"$VITKD" inspect cut/checkpoint.h5 > inspect.txt
grep -q "vitkd checkpoint" inspect.txt && grep -q "schedule complete" inspect.txt \
  && grep -q "sifting: $((64 + G)) losses in the history" inspect.txt || { cat inspect.txt; fail "inspect checkpoint"; }
steps=$("$PYTHON" -c "import json; print(json.load(open('cut/result.json'))['steps'])")
"$VITKD" inspect cut/timing.h5 | grep -q "at $np rank(s), $steps steps logged" || fail "inspect timing"
echo "OK 1: bit-exact resume at $np ranks (ce, kd and scope-teacher sifting)"

# ---- 2. resharded resume: written at another rank count -------------------------
other=$((np == 3 ? 2 : 3))
R=(train tiny.toml --set precision.compute=fp32)
expect 0 "${R[@]}" --set data.batch_size=$B --set run.out_dir=rfull
set +e
VITKD_TEST_PREEMPT_AT_STEP=10 mpi "$other" "${R[@]}" --set data.batch_size=$((G / other)) \
  --set run.out_dir=rcut > last.log 2>&1
rc=$?
set -e
[ "$rc" = 75 ] || { cat last.log; fail "preemption at $other ranks gave $rc"; }
expect 0 "${R[@]}" --set data.batch_size=$B --set run.out_dir=rcut
grep -q "resharded" last.log || fail "no reshard message"
# P=2 and P=3 differ only in reduction order: uninterrupted runs at 2 and 3
# ranks are ~2e-5 apart after these 64 steps.
cmp_ckpt rfull/checkpoint.h5 rcut/checkpoint.h5 --rtol 1e-4
# a global batch that does not match the checkpoint is refused with a fix
expect 0 "${R[@]}" --set data.batch_size=$B --set run.out_dir=rb --set train.max_steps=3 \
  --set checkpoint.every_steps=2
cp rb/checkpoint-step00000002.h5 rb2.h5
expect 2 "${R[@]}" --set data.batch_size=$((B + 1)) --set run.out_dir=rb3 --set checkpoint.resume=rb2.h5
grep -q "global batch of $G samples.*set data.batch_size = $B" last.log || { cat last.log; fail "batch mismatch message"; }
echo "OK 2: resharded resume from $other to $np ranks"

# ---- 3. kill -9 halfway through a checkpoint write -----------------------------
VITKD_TEST_PREEMPT_AT_STEP=20 expect 75 "${T[@]}" --set run.out_dir=kill
set +e
VITKD_TEST_CHECKPOINT_FAULT=kill:1 mpi "$np" "${T[@]}" --set run.out_dir=kill \
  --set checkpoint.every_steps=4 > last.log 2>&1
rc=$?
set -e
[ "$rc" != 0 ] || fail "a rank killed mid-checkpoint did not fail the job"
ls kill/*.tmp > /dev/null 2>&1 || fail "expected a half-written .tmp file"
"$PYTHON" -c "import h5py; f = h5py.File('kill/checkpoint.h5', 'r'); assert f.attrs['step'] == 20, f.attrs['step']"
expect 0 "${T[@]}" --set run.out_dir=kill
cmp_ckpt full/checkpoint.h5 kill/checkpoint.h5 --exact
echo "OK 3: the checkpoint before a kill -9 mid-write still loads and resumes exactly"

# ---- 4. SIGUSR1 to the launcher ------------------------------------------------
VITKD_TEST_SLOW_RANK=0:150 timeout 120 $MPIEXEC $MPIEXEC_NUMPROC_FLAG "$np" $MPIEXEC_PREFLAGS \
  "$VITKD" "${T[@]}" --set run.out_dir=usr1 > usr1.log 2>&1 &
pid=$!
for _ in $(seq 100); do grep -q "^setup took" usr1.log && break; sleep 0.2; done
sleep 1.5
launcher=$(pgrep -P $pid | head -1)   # the launcher under `timeout`
kill -USR1 "$launcher"
set +e
wait $pid
rc=$?
set -e
[ "$rc" = 75 ] || { cat usr1.log; fail "SIGUSR1 gave exit code $rc, expected 75"; }
"$PYTHON" -c "import h5py; f = h5py.File('usr1/checkpoint.h5', 'r'); assert f.attrs['has_state'] == 1 and 0 < f.attrs['step'] < 32"
expect 0 "${T[@]}" --set run.out_dir=usr1
cmp_ckpt full/checkpoint.h5 usr1/checkpoint.h5 --exact
echo "OK 4: SIGUSR1 -> checkpoint, exit 75, exact resume"

# ---- 5. a truncated checkpoint.h5 falls back to the previous one; keep --------
VITKD_TEST_PREEMPT_AT_STEP=20 expect 75 "${T[@]}" --set run.out_dir=trunc --set checkpoint.every_steps=4
n=$(ls trunc/checkpoint-step*.h5 | wc -l)
[ "$n" = 2 ] || fail "checkpoint.keep = 2 left $n step files"
truncate -s 2000 trunc/checkpoint.h5   # also truncates its hard link checkpoint-step00000020.h5
expect 0 "${T[@]}" --set run.out_dir=trunc --set checkpoint.every_steps=4
grep -q "falling back to the previous good checkpoint trunc/checkpoint-step00000016.h5" last.log \
  || { cat last.log; fail "no fallback message"; }
cmp_ckpt full/checkpoint.h5 trunc/checkpoint.h5 --exact
# ... and an explicit PATH to a corrupt file is an error, not a fresh start
truncate -s 2000 trunc/checkpoint-step00000032.h5
expect 2 "${T[@]}" --set run.out_dir=trunc2 --set checkpoint.resume=trunc/checkpoint-step00000032.h5
grep -q "checkpoint.resume: .*truncated or corrupt" last.log || { cat last.log; fail "corrupt PATH message"; }
echo "OK 5: truncated checkpoint -> previous good one; keep honoured"

# ---- 6. another model shape ----------------------------------------------------
expect 2 "${T[@]}" --set run.out_dir=shape --set model.dim=24 --set checkpoint.resume=full/checkpoint.h5
grep -q "another model shape" last.log || { cat last.log; fail "shape mismatch message"; }
[ ! -e shape/checkpoint.h5 ] || fail "a refused resume wrote a checkpoint"
mkdir -p auto && cp full/checkpoint.h5 auto/checkpoint.h5
expect 2 "${T[@]}" --set run.out_dir=auto --set model.dim=24
grep -q "none can be resumed" last.log || { cat last.log; fail "auto with only foreign checkpoints"; }
cmp -s full/checkpoint.h5 auto/checkpoint.h5 || fail "the refused run touched the old checkpoint"
echo "OK 6: checkpoints of another model shape are refused"
echo "OK: resume tests at $np ranks"
