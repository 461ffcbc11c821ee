#!/usr/bin/env bash
# Fault injection at NP ranks. Each case checks the exit code, the message,
# and that the last good checkpoint survives and resumes:
#   killed_rank_ends_job_and_run_resumes      a rank killed mid-step: the job ends within 30 s; resume finishes
#   nan_batch_is_skipped_and_counted          one corrupt (NaN) batch: the step is skipped and counted
#   persistent_nan_stops_with_diagnostic      NaN every step: after train.max_bad_steps a diagnostic
#                                             checkpoint and a clear stop; checkpoint.h5 untouched
#   failed_checkpoint_write_keeps_previous    a checkpoint write failing halfway: clean stop, previous kept
#   full_disk_keeps_previous_checkpoint       a full disk during a checkpoint (ulimit -f): same
#   e2e_faults.sh --list | CASE NP ROOT    (tests/lib/common.sh)
source "$(dirname "$0")/lib/common.sh"
CASES=(setup killed_rank_ends_job_and_run_resumes:setup nan_batch_is_skipped_and_counted:setup
       persistent_nan_stops_with_diagnostic:setup failed_checkpoint_write_keeps_previous:setup
       full_disk_keeps_previous_checkpoint:setup)

case_setup() {
  synthetic syn.h5 384 128 8 4 --seed 3
  tiny_config tiny.toml "data.path=\"$WORK/syn.h5\"" checkpoint.every_steps=4
}

T=(train "${3-}/setup/tiny.toml")
spe() { echo $(( (384 + 4 * NP - 1) / (4 * NP) )); }  # steps in the epoch

case_killed_rank_ends_job_and_run_resumes() {
  local t0 dt
  t0=$(date +%s)
  MPI_TIMEOUT=120 expect nonzero vk "$NP" VITKD_TEST_KILL_RANK=1:10 "${T[@]}" --set run.out_dir=kill
  dt=$(( $(date +%s) - t0 ))
  [ "$dt" -le 30 ] || fail "the job took $dt s to end after a rank died"
  [ "$(h5_attr kill/checkpoint.h5 step)" = 8 ] || fail "expected the step-8 checkpoint"
  MPI_TIMEOUT=120 expect 0 vk "$NP" "${T[@]}" --set run.out_dir=kill
  grep -q "resume: from kill/checkpoint.h5" last.log || fail "no resume after the kill"
  [ "$(h5_attr kill/checkpoint.h5 step)" = "$(spe)" ] || fail "resumed run did not finish"
  echo "killed rank -> job ended in $dt s, resume finished"
}

case_nan_batch_is_skipped_and_counted() {
  MPI_TIMEOUT=120 expect 0 vk "$NP" VITKD_TEST_CORRUPT_BATCH=6 "${T[@]}" --set run.out_dir=nan1
  grep -q "step 7: non-finite loss or gradient.*update skipped (1 in a row" last.log || { cat last.log; fail "no skip message"; }
  "$PYTHON" -c "import json, math; r = json.load(open('nan1/result.json')); assert r['skipped_steps'] == 1, r['skipped_steps']; assert math.isfinite(r['final_loss'])"
}

case_persistent_nan_stops_with_diagnostic() {
  MPI_TIMEOUT=120 expect 1 vk "$NP" VITKD_TEST_CORRUPT_BATCH=6:1000 "${T[@]}" --set run.out_dir=nanrun \
    --set train.max_bad_steps=3
  grep -q "3 consecutive steps had a non-finite loss or gradient (train.max_bad_steps = 3); stopped at step 9 and wrote nanrun/diagnostic-step00000009.h5" last.log \
    || { cat last.log; fail "no max_bad_steps message"; }
  [ "$(grep -c 'vitkd: error' last.log)" = 1 ] || fail "the error was printed more than once"
  [ -f nanrun/diagnostic-step00000009.h5 ] || fail "no diagnostic checkpoint"
  [ "$(h5_attr nanrun/checkpoint.h5 step)" = 4 ] || fail "checkpoint.h5 moved past the last good step"
  MPI_TIMEOUT=120 expect 0 vk "$NP" "${T[@]}" --set run.out_dir=nanrun
}

case_failed_checkpoint_write_keeps_previous() {
  local t0 dt
  MPI_TIMEOUT=120 expect 75 vk "$NP" VITKD_TEST_PREEMPT_AT_STEP=5 "${T[@]}" --set run.out_dir=ckfail
  cp ckfail/checkpoint.h5 before.h5
  t0=$(date +%s)
  MPI_TIMEOUT=120 expect nonzero vk "$NP" VITKD_TEST_CHECKPOINT_FAULT=fail:1 "${T[@]}" --set run.out_dir=ckfail
  dt=$(( $(date +%s) - t0 ))
  grep -q "checkpoint write failed halfway" last.log || { cat last.log; fail "no message"; }
  [ "$dt" -le 30 ] || fail "took $dt s"
  cmp -s before.h5 ckfail/checkpoint.h5 || fail "the failed write damaged checkpoint.h5"
  MPI_TIMEOUT=120 expect 0 vk "$NP" "${T[@]}" --set run.out_dir=ckfail
}

case_full_disk_keeps_previous_checkpoint() {
  local big=("${T[@]}" --set model.dim=192 --set model.heads=3 --set model.depth=2)  # a 7 MB checkpoint
  MPI_TIMEOUT=120 expect 75 vk "$NP" VITKD_TEST_PREEMPT_AT_STEP=5 "${big[@]}" --set run.out_dir=full
  cp full/checkpoint.h5 before.h5
  local size_kb=$(( $(stat -c %s full/checkpoint.h5) / 1024 ))
  # Room for the timing log but not for another checkpoint. The limit applies to
  # the vitkd processes only (the launcher's own shared-memory files need more).
  MPI_TIMEOUT=120 expect nonzero mpi "$NP" bash -c "ulimit -f $((size_kb / 2)); exec \"\$0\" \"\$@\"" \
    "$VITKD" "${big[@]}" --set run.out_dir=full
  grep -q "vitkd: error.*HDF5 call failed: H5Dwrite" last.log || { cat last.log; fail "no I/O error message"; }
  cmp -s before.h5 full/checkpoint.h5 || fail "the full disk damaged checkpoint.h5"
  MPI_TIMEOUT=120 expect 0 vk "$NP" "${big[@]}" --set run.out_dir=full
  grep -q "resume: from full/checkpoint.h5" last.log || fail "no resume after the full disk"
}

e2e_main "$@"
