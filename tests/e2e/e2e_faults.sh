#!/usr/bin/env bash
# Fault injection at NP ranks. Each case checks the exit code, the message,
# and that the last good checkpoint survives and resumes:
#   killed_rank_ends_job_and_run_resumes      a rank killed mid-step: the job ends within 30 s; resume finishes
#   nan_batch_is_skipped_and_counted          one corrupt (NaN) batch: the step is skipped and counted
#   persistent_nan_stops_with_diagnostic      NaN every step: after train.max_bad_steps a diagnostic
#                                             checkpoint and a clear stop; checkpoint.h5 untouched
#   failed_checkpoint_write_keeps_previous    a checkpoint write failing halfway: clean stop, previous kept
#   full_disk_keeps_previous_checkpoint       a full disk during a checkpoint (ulimit -f): same
#   killed_checkpoint_write_leaves_a_readable_checkpoint
#                                             rank 0 killed at each stage of a checkpoint write
#                                             (before the close, before the rename, after the
#                                             rename): the previous or the new checkpoint reads
#                                             back, and the next run resumes and finishes
#   checkpoint_is_synced_around_its_rename    (under strace) the file is fsynced before its
#                                             rename, the directory after it and after publishing
#   e2e_faults.sh --list | CASE NP ROOT    (tests/lib/common.sh)
source "$(dirname "$0")/../lib/common.sh"
CASES=(setup killed_rank_ends_job_and_run_resumes:setup nan_batch_is_skipped_and_counted:setup
       persistent_nan_stops_with_diagnostic:setup failed_checkpoint_write_keeps_previous:setup
       full_disk_keeps_previous_checkpoint:setup killed_checkpoint_write_leaves_a_readable_checkpoint:setup
       checkpoint_is_synced_around_its_rename:setup)

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
  # UCX (MPICH's ch4:ucx) writes its shared-memory segments as files, which
  # the limit would fail in MPI_Init: its System V segments instead (UCX_TLS).
  MPI_TIMEOUT=120 expect nonzero mpi "$NP" UCX_TLS=^posix bash -c "ulimit -f $((size_kb / 2)); exec \"\$0\" \"\$@\"" \
    "$VITKD" "${big[@]}" --set run.out_dir=full
  grep -q "vitkd: error.*HDF5 call failed: H5Dwrite" last.log || { cat last.log; fail "no I/O error message"; }
  cmp -s before.h5 full/checkpoint.h5 || fail "the full disk damaged checkpoint.h5"
  MPI_TIMEOUT=120 expect 0 vk "$NP" "${big[@]}" --set run.out_dir=full
  grep -q "resume: from full/checkpoint.h5" last.log || fail "no resume after the full disk"
}

case_killed_checkpoint_write_leaves_a_readable_checkpoint() {
  local stage d
  for stage in write rename renamed; do
    d=ck_$stage
    # checkpoint.h5 at step 5; the next run's first write (step 8) is killed.
    MPI_TIMEOUT=120 expect 75 vk "$NP" VITKD_TEST_PREEMPT_AT_STEP=5 "${T[@]}" --set run.out_dir=$d
    cp $d/checkpoint.h5 before.h5
    MPI_TIMEOUT=120 expect nonzero vk "$NP" VITKD_TEST_CHECKPOINT_FAULT=kill:0:$stage "${T[@]}" --set run.out_dir=$d
    [ "$(h5_attr $d/checkpoint.h5 step)" = 5 ] || fail "$stage: checkpoint.h5 is not the step-5 checkpoint"
    cmp -s before.h5 $d/checkpoint.h5 || fail "$stage: the killed write changed checkpoint.h5"
    case $stage in
      write | rename)
        [ ! -e $d/checkpoint-step00000008.h5 ] || fail "$stage: a step-8 file before its rename" ;;
      renamed)
        [ "$(h5_attr $d/checkpoint-step00000008.h5 step)" = 8 ] || fail "$stage: the renamed step-8 file does not read back" ;;
    esac
    MPI_TIMEOUT=120 expect 0 vk "$NP" "${T[@]}" --set run.out_dir=$d
    grep -q "resume: from $d/checkpoint.h5" last.log || { cat last.log; fail "$stage: no resume"; }
    [ "$(h5_attr $d/checkpoint.h5 step)" = "$(spe)" ] || fail "$stage: the resumed run did not finish"
    echo "ok: killed at stage $stage: checkpoint.h5 at step 5 read back and resumed"
  done
}

case_checkpoint_is_synced_around_its_rename() {
  command -v strace > /dev/null || { echo "SKIP: no strace (Debian: strace)"; exit 77; }
  strace -f -qq -o /dev/null true 2> /dev/null || { echo "SKIP: strace cannot trace here (ptrace denied)"; exit 77; }
  MPI_TIMEOUT=120 expect 0 mpi "$NP" strace -f -qq -ff -o trace -e trace=openat,fsync,rename,link \
    "$VITKD" "${T[@]}" --set run.out_dir=sync --set checkpoint.every_steps=0
  # The rank that renamed: open+fsync of the .tmp file, rename, open+fsync of the
  # directory; then checkpoint.h5 linked/renamed into place, the directory synced again.
  "$PYTHON" - trace.* <<'PY'
import re, sys
ok = False
for path in sys.argv[1:]:
    lines = open(path).read().splitlines()
    if not any("rename(" in l and ".h5.tmp" in l for l in lines):
        continue
    fds, events = {}, []
    for l in lines:
        m = re.match(r'openat\(AT_FDCWD, "([^"]+)", ([^)]*)\)\s*= (\d+)', l)
        if m:
            fds[m.group(3)] = (m.group(1), "O_DIRECTORY" in m.group(2))
            continue
        m = re.match(r'fsync\((\d+)\)\s*= 0', l)
        if m and m.group(1) in fds:
            name, is_dir = fds[m.group(1)]
            events.append(("syncdir" if is_dir else "sync", name))
            continue
        m = re.match(r'rename\("([^"]+)", "([^"]+)"\)\s*= 0', l)
        if m:
            events.append(("rename", m.group(1), m.group(2)))
    seq = [e[0] for e in events]
    for i, e in enumerate(events):
        if e[0] == "rename" and e[1].endswith(".h5.tmp"):
            assert i >= 1 and events[i - 1] == ("sync", e[1]), f"{e[1]}: not fsynced before its rename: {events[max(0, i-3):i+3]}"
            assert i + 1 < len(events) and events[i + 1][0] == "syncdir", f"no directory fsync after renaming {e[1]}: {events[i:i+3]}"
            ok = True
        if e[0] == "rename" and e[2].endswith("/checkpoint.h5"):
            assert i + 1 < len(events) and events[i + 1][0] == "syncdir", f"no directory fsync after publishing: {events[i:i+3]}"
assert ok, "no checkpoint rename in the traces"
print("ok: fsync before and after the renames")
PY
}

e2e_main "$@"
