#!/usr/bin/env bash
# Checkpoint and resume at NP ranks. "setup" trains the reference run (two
# epochs, sifting from step 5, no checkpoints) in ROOT/setup/full; then:
#   preempted_run_resumes_bit_identical       N steps in one run == k steps, preemption (exit 75),
#                                             N-k more (ce sifting); the timing log is appended to
#   inspect_summarises_resumed_run            vitkd inspect on that run's checkpoint and timing log
#   kd_sifting_resume_is_bit_identical        the same, distilling with kd sifting (pooled teacher logits)
#   scope_teacher_resume_is_bit_identical     the same, distilling with scope "teacher" sifting
#                                             (history and kept count carry over)
#   in_forward_resume_is_bit_identical        the same, distilling with sift.pass "in_forward"
#   drop_path_resume_is_bit_identical         the same with stochastic depth (model.drop_path = 0.3,
#                                             3 blocks): its masks are keyed, not drawn in order
#   resume_at_other_rank_count_within_rtol    written at another rank count, resumed at NP
#   other_global_batch_is_refused_with_fix    a global batch that does not match the checkpoint
#   kill_during_checkpoint_keeps_previous     a rank SIGKILLed halfway through a checkpoint write
#                                             leaves the previous one loadable; the resume is exact
#   sigusr1_checkpoints_and_resumes_exactly   SIGUSR1 to the launcher: checkpoint, exit 75, resume
#   truncated_checkpoint_falls_back           resume = "auto" falls back to the previous good
#                                             checkpoint and says so; checkpoint.keep is honoured
#   corrupt_resume_path_is_an_error           an explicit checkpoint.resume PATH to a corrupt file
#   other_model_shape_is_refused              a checkpoint of another model shape: exit 2
#   auto_with_only_foreign_checkpoints_is_refused
#   finished_run_extends_with_recomputed_schedule
#                                             10 steps, then resumed with train.max_steps = 20: it
#                                             continues from step 10 (data cursor, counters) with the
#                                             lr of the 20-step schedule; the result equals neither a
#                                             fresh 20-step run nor the 10-step one
#   shorter_schedule_is_refused_naming_the_step
#                                             resuming with fewer steps than done: exit 2, the
#                                             checkpoint's step in the message, nothing written
#   e2e_resume.sh --list | CASE NP ROOT    (tests/lib/common.sh)
source "$(dirname "$0")/../lib/common.sh"
CASES=(setup preempted_run_resumes_bit_identical:setup
       inspect_summarises_resumed_run:setup:preempted_run_resumes_bit_identical
       kd_sifting_resume_is_bit_identical:setup scope_teacher_resume_is_bit_identical:setup
       in_forward_resume_is_bit_identical:setup
       drop_path_resume_is_bit_identical:setup
       resume_at_other_rank_count_within_rtol:setup other_global_batch_is_refused_with_fix:setup
       kill_during_checkpoint_keeps_previous:setup sigusr1_checkpoints_and_resumes_exactly:setup
       truncated_checkpoint_falls_back:setup corrupt_resume_path_is_an_error:setup
       other_model_shape_is_refused:setup auto_with_only_foreign_checkpoints_is_refused:setup
       finished_run_extends_with_recomputed_schedule:setup shorter_schedule_is_refused_naming_the_step:setup)

SETUP=${3-}/setup
FULL=$SETUP/full/checkpoint.h5   # the uninterrupted reference run
G=12                             # global batch: 4 x 3 ranks, 6 x 2 ranks
B=$((G / ${2:-1}))
SIFT=(--set sift.enabled=true --set sift.delay=5 --set sift.history=64)
T=(train "$SETUP/tiny.toml" --set data.batch_size=$B "${SIFT[@]}")
export MPI_TIMEOUT=120

case_setup() {
  synthetic syn.h5 384 128 8 4 --seed 3
  tiny_config tiny.toml "data.path=\"$WORK/syn.h5\"" train.epochs=2 train.timing_every_steps=5 \
    checkpoint.every_steps=0
  expect 0 vk "$NP" "${T[@]}" --set run.out_dir=full
}

# FULL CUT ARGS...: one run in FULL, and in CUT a run preempted after step 17
# and resumed; the final checkpoints must be bit-identical.
preempted_equals_full() {
  local full=$1 cut=$2
  shift 2
  expect 0 vk "$NP" "$@" --set run.out_dir="$full"
  expect 75 vk "$NP" VITKD_TEST_PREEMPT_AT_STEP=17 "$@" --set run.out_dir="$cut"
  expect 0 vk "$NP" "$@" --set run.out_dir="$cut"
  cmp_ckpt "$full/checkpoint.h5" "$cut/checkpoint.h5" --exact
}
D=("${T[@]}" --set run.mode=distill --set teacher.checkpoint="$FULL" --set model.dim=8)

case_preempted_run_resumes_bit_identical() {
  expect 75 vk "$NP" VITKD_TEST_PREEMPT_AT_STEP=20 "${T[@]}" --set run.out_dir=cut
  grep -q "exiting with code 75" last.log || fail "no preemption message"
  expect 0 vk "$NP" "${T[@]}" --set run.out_dir=cut
  grep -q "resume: from cut/checkpoint.h5" last.log || fail "did not resume"
  cmp_ckpt "$FULL" cut/checkpoint.h5 --exact
  "$PYTHON" - "$SETUP/full" <<'PY'
import h5py, json, sys
a, b = json.load(open(f"{sys.argv[1]}/result.json")), json.load(open("cut/result.json"))
for k in ("steps", "samples_seen", "samples_trained", "test_top1", "kept_fraction"):
    assert a[k] == b[k], (k, a[k], b[k])
with h5py.File("cut/timing.h5", "r") as f:  # the resumed run appended, without duplicate steps
    s = f["metrics/step"][()]
    assert list(s) == list(range(1, a["steps"] + 1)), s
PY
}

case_inspect_summarises_resumed_run() {
  local cut=$ROOT/preempted_run_resumes_bit_identical/cut steps
  "$VITKD" inspect "$cut/checkpoint.h5" > inspect.txt
  grep -q "vitkd checkpoint" inspect.txt && grep -q "schedule complete" inspect.txt \
    && grep -q "sifting: $((64 + G)) losses in the history" inspect.txt || { cat inspect.txt; fail "inspect checkpoint"; }
  steps=$(json_get "$cut/result.json" steps)
  "$VITKD" inspect "$cut/timing.h5" > inspect_timing.txt
  grep -q "at $NP rank(s), $steps steps logged" inspect_timing.txt || { cat inspect_timing.txt; fail "inspect timing"; }
}

case_kd_sifting_resume_is_bit_identical() {
  # the pool carries teacher logits across the stop
  preempted_equals_full dfull dcut "${D[@]}" --set sift.criterion=kd
}

case_drop_path_resume_is_bit_identical() {
  preempted_equals_full dpfull dpcut "${T[@]}" --set model.depth=3 --set model.drop_path=0.3
  grep -q "stochastic depth: drop_path 0.3 " last.log || fail "start-up line: $(grep -m1 'stochastic depth' last.log)"
}

case_scope_teacher_resume_is_bit_identical() {
  preempted_equals_full tfull tcut "${D[@]}" --set sift.scope=teacher
  "$PYTHON" - <<'PY'
import json
a, b = json.load(open("tfull/result.json")), json.load(open("tcut/result.json"))
for k in ("steps", "samples_seen", "samples_trained", "samples_kept", "teacher_forwards", "kept_fraction"):
    assert a[k] == b[k], (k, a[k], b[k])
assert a["samples_kept"] < a["samples_seen"] == a["samples_trained"], a
PY
}

case_in_forward_resume_is_bit_identical() {
  preempted_equals_full ffull fcut "${D[@]}" --set sift.pass=in_forward
}

R=(train "$SETUP/tiny.toml" --set precision.compute=fp32)
other=$(( ${2:-2} == 3 ? 2 : 3 ))

case_resume_at_other_rank_count_within_rtol() {
  expect 0 vk "$NP" "${R[@]}" --set data.batch_size=$B --set run.out_dir=rfull
  expect 75 vk "$other" VITKD_TEST_PREEMPT_AT_STEP=10 "${R[@]}" --set data.batch_size=$((G / other)) \
    --set run.out_dir=rcut
  expect 0 vk "$NP" "${R[@]}" --set data.batch_size=$B --set run.out_dir=rcut
  grep -q "resharded" last.log || fail "no reshard message"
  # P=2 and P=3 differ only in reduction order: uninterrupted runs at 2 and 3
  # ranks are ~2e-5 apart after these 64 steps.
  cmp_ckpt rfull/checkpoint.h5 rcut/checkpoint.h5 --rtol 1e-4
}

case_other_global_batch_is_refused_with_fix() {
  expect 0 vk "$NP" "${R[@]}" --set data.batch_size=$B --set run.out_dir=rb --set train.max_steps=3 \
    --set checkpoint.every_steps=2
  cp rb/checkpoint-step00000002.h5 rb2.h5
  expect 2 vk "$NP" "${R[@]}" --set data.batch_size=$((B + 1)) --set run.out_dir=rb3 --set checkpoint.resume=rb2.h5
  grep -q "global batch of $G samples.*set data.batch_size = $B" last.log || { cat last.log; fail "batch mismatch message"; }
}

case_kill_during_checkpoint_keeps_previous() {
  expect 75 vk "$NP" VITKD_TEST_PREEMPT_AT_STEP=20 "${T[@]}" --set run.out_dir=kill
  local rc=0
  vk "$NP" VITKD_TEST_CHECKPOINT_FAULT=kill:1 "${T[@]}" --set run.out_dir=kill \
    --set checkpoint.every_steps=4 > last.log 2>&1 || rc=$?
  [ "$rc" != 0 ] || fail "a rank killed mid-checkpoint did not fail the job"
  ls kill/*.tmp > /dev/null 2>&1 || fail "expected a half-written .tmp file"
  [ "$(h5_attr kill/checkpoint.h5 step)" = 20 ] || fail "checkpoint.h5 is not the step-20 one"
  expect 0 vk "$NP" "${T[@]}" --set run.out_dir=kill
  cmp_ckpt "$FULL" kill/checkpoint.h5 --exact
}

case_sigusr1_checkpoints_and_resumes_exactly() {
  mpi_cmd "$NP" VITKD_TEST_SLOW_RANK=0:150 "$VITKD" "${T[@]}" --set run.out_dir=usr1
  timeout 120 "${MPI_CMD[@]}" > usr1.log 2>&1 &
  local pid=$! launcher rc=0
  for _ in $(seq 100); do grep -q "^setup took" usr1.log && break; sleep 0.2; done
  sleep 1.5
  launcher=$(pgrep -P $pid | head -1)   # the launcher under `timeout`
  kill -USR1 "$launcher"
  wait $pid || rc=$?
  [ "$rc" = 75 ] || { cat usr1.log; fail "SIGUSR1 gave exit code $rc, expected 75"; }
  "$PYTHON" -c "import h5py; f = h5py.File('usr1/checkpoint.h5', 'r'); assert f.attrs['has_state'] == 1 and 0 < f.attrs['step'] < 32"
  expect 0 vk "$NP" "${T[@]}" --set run.out_dir=usr1
  cmp_ckpt "$FULL" usr1/checkpoint.h5 --exact
}

case_truncated_checkpoint_falls_back() {
  expect 75 vk "$NP" VITKD_TEST_PREEMPT_AT_STEP=20 "${T[@]}" --set run.out_dir=trunc --set checkpoint.every_steps=4
  local n
  n=$(ls trunc/checkpoint-step*.h5 | wc -l)
  [ "$n" = 2 ] || fail "checkpoint.keep = 2 left $n step files"
  truncate -s 2000 trunc/checkpoint.h5   # also truncates its hard link checkpoint-step00000020.h5
  expect 0 vk "$NP" "${T[@]}" --set run.out_dir=trunc --set checkpoint.every_steps=4
  grep -q "falling back to the previous good checkpoint trunc/checkpoint-step00000016.h5" last.log \
    || { cat last.log; fail "no fallback message"; }
  cmp_ckpt "$FULL" trunc/checkpoint.h5 --exact
}

case_corrupt_resume_path_is_an_error() {
  cp "$FULL" corrupt.h5
  truncate -s 2000 corrupt.h5
  expect 2 vk "$NP" "${T[@]}" --set run.out_dir=trunc2 --set checkpoint.resume=corrupt.h5
  grep -q "checkpoint.resume: .*truncated or corrupt" last.log || { cat last.log; fail "corrupt PATH message"; }
}

case_other_model_shape_is_refused() {
  expect 2 vk "$NP" "${T[@]}" --set run.out_dir=shape --set model.dim=24 --set checkpoint.resume="$FULL"
  grep -q "another model shape" last.log || { cat last.log; fail "shape mismatch message"; }
  [ ! -e shape/checkpoint.h5 ] || fail "a refused resume wrote a checkpoint"
}

case_auto_with_only_foreign_checkpoints_is_refused() {
  mkdir -p auto && cp "$FULL" auto/checkpoint.h5
  expect 2 vk "$NP" "${T[@]}" --set run.out_dir=auto --set model.dim=24
  grep -q "none can be resumed" last.log || { cat last.log; fail "auto with only foreign checkpoints"; }
  cmp -s "$FULL" auto/checkpoint.h5 || fail "the refused run touched the old checkpoint"
}

# No sifting, one timing row per step: the extension's own checks.
X=(train "$SETUP/tiny.toml" --set data.batch_size=$B --set train.timing_every_steps=1)

case_finished_run_extends_with_recomputed_schedule() {
  expect 0 vk "$NP" "${X[@]}" --set run.out_dir=ext --set train.max_steps=10
  cp ext/checkpoint.h5 ten.h5
  expect 0 vk "$NP" "${X[@]}" --set run.out_dir=ext --set train.max_steps=20
  grep -q "resume: extending the finished run from step 10 to 20" last.log ||
    { cat last.log; fail "the log does not say the run was extended"; }
  expect 0 vk "$NP" "${X[@]}" --set run.out_dir=fresh --set train.max_steps=20
  "$PYTHON" - "$G" <<'PY'
import json, math, sys
import h5py, numpy as np
G = int(sys.argv[1])
r = json.load(open("ext/result.json"))
assert r["steps"] == 20 and r["extended_from_step"] == 10, r
assert r["samples_seen"] == 20 * G, r["samples_seen"]
with h5py.File("ext/checkpoint.h5") as e, h5py.File("fresh/checkpoint.h5") as f, h5py.File("ten.h5") as t:
    assert int(e.attrs["step"]) == 20 and int(e.attrs["complete"]) == 1
    names = list(e["model"].keys())
    def dist(a, b):
        return math.sqrt(sum(float(np.sum((a["model"][n][()] - b["model"][n][()]) ** 2)) for n in names))
    assert dist(e, f) > 0, "the extended run equals a fresh 20-step run"
    assert dist(e, t) > 0, "the extension trained nothing"
    # The data cursor went on from step 10: 384 samples = 32 batches of 12 per epoch.
    assert int(t.attrs["data_batch"]) == 10 and int(e.attrs["data_batch"]) == 20, \
        (int(t.attrs["data_batch"]), int(e.attrs["data_batch"]))
with h5py.File("ext/timing.h5") as tl, h5py.File("fresh/timing.h5") as tf:
    steps = tl["/metrics/step"][()]
    lr = tl["/metrics/lr"][()]
    lr_fresh = tf["/metrics/lr"][()]
assert list(steps) == list(range(1, 21)), list(steps)
# Steps 11..20 follow the 20-step schedule (the samples seen are the same as
# in the fresh run); steps 1..10 followed the 10-step one, which decays sooner.
assert np.allclose(lr[10:], lr_fresh[10:], rtol=1e-12), (lr[10:], lr_fresh[10:])
assert lr[9] < lr_fresh[9], (lr[9], lr_fresh[9])
print(f"ok: extended 10 -> 20 steps; lr at step 11 {lr[10]:.3e} (10-step run ended at {lr[9]:.3e})")
PY
}

case_shorter_schedule_is_refused_naming_the_step() {
  expect 0 vk "$NP" "${X[@]}" --set run.out_dir=done --set train.max_steps=10
  local before
  before=$(md5sum done/checkpoint.h5 done/result.json done/timing.h5)
  expect_error 2 "done/checkpoint.h5 is at step 10, beyond this schedule of 5 steps" \
    vk "$NP" "${X[@]}" --set run.out_dir=done --set train.max_steps=5
  [ "$before" = "$(md5sum done/checkpoint.h5 done/result.json done/timing.h5)" ] || fail "files changed"
}

e2e_main "$@"
