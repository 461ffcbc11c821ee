#!/usr/bin/env bash
# jobs/slurm.sbatch under stand-ins for srun and scontrol, at 2 ranks, with the
# build's own MPI launcher (so under MPICH's too). The real Slurm test,
# tests/cluster/slurm_cluster.sh, covers SIGUSR1 -> requeue -> resume, the time limit,
# scancel, a missing plugin and a missing configuration under slurmctld and
# slurmd with OpenMPI; these cases check what it cannot:
#   term_is_a_cancel_not_a_requeue          SIGTERM (scancel) to the batch shell: the ranks
#                                           checkpoint and the script exits with their 75 (the
#                                           exact code), no requeue
#   usr1_during_start_up_is_kept            SIGUSR1 while the ranks start (before MPI_Init), through
#                                           any MPI launcher: they checkpoint after their first
#                                           step, exit 75, the job requeues and the next run resumes
#   srun_mpi_plugin_is_chosen               srun --mpi=pmix unless SLURM_MPI_TYPE says otherwise
#   missing_configuration_is_usage          no configuration, or a file that does not exist, no ranks
#                                           (SLURM_NTASKS=0), no vitkd binary: exit 2, one line
#   e2e_slurm.sh --list | CASE NP ROOT    (tests/lib/common.sh)
source "$(dirname "$0")/../lib/common.sh"
CASES=(term_is_a_cancel_not_a_requeue usr1_during_start_up_is_kept srun_mpi_plugin_is_chosen
       missing_configuration_is_usage)

# Stand-ins in $WORK/bin: srun drops its options (logging its arguments to
# srun.calls), starts the ranks with the MPI launcher (which forwards SIGUSR1
# to them; SIGTERM the stand-in forwards to the ranks itself, as srun does,
# since MPI launchers end the job on it) and hands them the SLURM_* and
# VITKD_TEST_* variables through env (srun exports the environment);
# `srun --mpi=list` lists none, pmi2 and pmix; an --mpi=TYPE not among them
# fails as Slurm 22.05's srun does; without --mpi the cluster's default serves. scontrol logs its arguments to scontrol.calls.
stand_ins() {
  mkdir -p bin
  cat > bin/srun <<SH
#!/usr/bin/env bash
echo "\$*" >> $WORK/srun.calls
if [ "\$1" = --mpi=list ]; then printf 'MPI plugin types are...\n\tnone\n\tpmi2\n\tpmix\n'; exit 0; fi
for a in "\$@"; do
  case \$a in --mpi=none|--mpi=pmi2|--mpi=pmix) ;; --mpi=*)
    echo "srun: error: Couldn't find the specified plugin name for mpi/\${a#--mpi=} looking at all files" >&2
    echo "srun: error: cannot create mpi context for mpi/\${a#--mpi=}" >&2
    echo "srun: error: invalid MPI type '\${a#--mpi=}', --mpi=list for acceptable types" >&2
    exit 1 ;;
  esac
done
while [ \$# -gt 0 ] && [ "\${1#--}" != "\$1" ]; do shift; done
fwd=()
for v in \${!SLURM_@} \${!VITKD_TEST_@}; do fwd+=("\$v=\${!v}"); done
$MPIEXEC $MPIEXEC_NUMPROC_FLAG $NP ${MPIEXEC_PREFLAGS-} env "\${fwd[@]}" "\$@" &
launcher=\$!
ranks() {  # the vitkd processes below the launcher
  local c
  for c in \$(cat /proc/\$1/task/*/children 2>/dev/null); do
    if [ "\$(cat /proc/\$c/comm 2>/dev/null)" = vitkd ]; then echo \$c; else ranks \$c; fi
  done
}
trap 'kill -USR1 \$launcher' USR1
trap 'for r in \$(ranks \$launcher); do kill -TERM \$r; done' TERM
while true; do
  wait \$launcher
  rc=\$?
  kill -0 \$launcher 2>/dev/null || exit \$rc
done
SH
  printf '#!/usr/bin/env bash\necho "$@" >> %s/scontrol.calls\n' "$WORK" > bin/scontrol
  chmod +x bin/srun bin/scontrol
  touch scontrol.calls
  synthetic syn.h5 384 128 8 4 --seed 3
  export PATH="$WORK/bin:$PATH" SLURM_JOB_ID=4242 SLURM_NTASKS=$NP SLURM_CPUS_PER_TASK=1 SLURM_SUBMIT_DIR="$WORK"
  ARGS=("$SRC/inputs/smoke.toml" --set data.path=syn.h5 --set run.out_dir=run --set model.dim=16
        --set model.depth=1 --set model.image_size=8 --set data.batch_size=4 --set train.epochs=2
        --set train.mfu_ceiling=1e11)
}

# job LOG [NAME=VALUE ...]: the batch script in the background (JOB: its pid).
job() {
  local log=$1
  shift
  env "$@" VITKD="$VITKD" bash "$SRC/jobs/slurm.sbatch" "${ARGS[@]}" > "$log" 2>&1 &
  JOB=$!
}
# wait_for LOG PATTERN [N]: until LOG holds N (default 1) lines with PATTERN (at most 60 s).
wait_for() {
  for _ in $(seq 300); do [ "$(grep -c "$2" "$1")" -ge "${3:-1}" ] && return 0; sleep 0.2; done
  cat "$1"
  fail "no '$2' in $1"
}
# finish_requeued: the requeued run resumes from run/checkpoint.h5 and finishes (no second requeue).
finish_requeued() {
  VITKD="$VITKD" bash "$SRC/jobs/slurm.sbatch" "${ARGS[@]}" > job2.log 2>&1 || { cat job2.log; fail "requeued run"; }
  grep -q "resume: from run/checkpoint.h5" job2.log || { cat job2.log; fail "the requeued run did not resume"; }
  [ "$(wc -l < scontrol.calls)" = 1 ] || fail "requeued more than once"
  "$PYTHON" -c "import json; r = json.load(open('run/result.json')); assert r['epochs'] == 2 and r['world_size'] == $NP"
}

case_term_is_a_cancel_not_a_requeue() {
  stand_ins
  job job1.log VITKD_TEST_SLOW_RANK=0:100
  local rc=0
  wait_for job1.log "^setup took"
  sleep 1
  kill -TERM $JOB
  wait $JOB || rc=$?
  [ "$rc" = 75 ] || { cat job1.log; fail "the batch script exited with $rc after SIGTERM, not the ranks' 75"; }
  [ ! -s scontrol.calls ] || { cat scontrol.calls; fail "a cancelled job was requeued"; }
  "$PYTHON" -c "import h5py; f = h5py.File('run/checkpoint.h5', 'r'); assert f.attrs['step'] > 0" ||
    fail "no readable checkpoint after the cancel"
}

case_usr1_during_start_up_is_kept() {
  stand_ins
  # Every rank pauses 3 s before MPI_Init; the signal comes during the pause.
  job job1.log VITKD_TEST_START_PAUSE_MS=3000
  local rc=0
  wait_for job1.log "test fault: start-up pause" "$NP"  # every rank is in main
  sleep 0.5
  kill -USR1 $JOB
  wait $JOB || rc=$?
  [ "$rc" = 0 ] || { cat job1.log; fail "the batch script exited with $rc: the ranks did not survive SIGUSR1 in start-up"; }
  grep -q "preempted (SIGTERM/SIGUSR1) after step 1:" job1.log ||
    { cat job1.log; fail "the ranks did not checkpoint after their first step"; }
  grep -qx "requeue 4242" scontrol.calls || fail "no 'scontrol requeue 4242'"
  finish_requeued
}

case_srun_mpi_plugin_is_chosen() {
  stand_ins
  local small=(--set train.epochs=1 --set data.batch_size=96)
  VITKD="$VITKD" bash "$SRC/jobs/slurm.sbatch" "${ARGS[@]}" "${small[@]}" > job1.log 2>&1 || { cat job1.log; fail "job"; }
  grep -q -- "^--mpi=pmix " srun.calls || { cat srun.calls; fail "srun without --mpi=pmix by default"; }
  rm srun.calls
  SLURM_MPI_TYPE=pmi2 VITKD="$VITKD" bash "$SRC/jobs/slurm.sbatch" "${ARGS[@]}" "${small[@]}" --set run.out_dir=run2 \
    > job2.log 2>&1 || { cat job2.log; fail "job with SLURM_MPI_TYPE=pmi2"; }
  grep -q -- "^--mpi=pmi2 " srun.calls || { cat srun.calls; fail "SLURM_MPI_TYPE=pmi2 did not reach srun"; }
}

case_missing_configuration_is_usage() {
  local rc=0
  bash "$SRC/jobs/slurm.sbatch" > none.log 2>&1 || rc=$?
  [ "$rc" = 2 ] && [ "$(wc -l < none.log)" = 1 ] && grep -q "^usage: sbatch jobs/slurm.sbatch CONFIG.toml" none.log ||
    { cat none.log; fail "no configuration: exit $rc, not one usage line and 2"; }
  rc=0
  SLURM_SUBMIT_DIR="$WORK" bash "$SRC/jobs/slurm.sbatch" nosuch.toml > missing.log 2>&1 || rc=$?
  [ "$rc" = 2 ] && [ "$(wc -l < missing.log)" = 1 ] && grep -q "no configuration file 'nosuch.toml'" missing.log ||
    { cat missing.log; fail "a missing configuration file: exit $rc, not one line and 2"; }
  echo "[run]" > ok.toml
  rc=0
  SLURM_SUBMIT_DIR="$WORK" SLURM_NTASKS=0 bash "$SRC/jobs/slurm.sbatch" ok.toml > zero.log 2>&1 || rc=$?
  [ "$rc" = 2 ] && [ "$(wc -l < zero.log)" = 1 ] && grep -q "SLURM_NTASKS=0 gives no ranks to run" zero.log ||
    { cat zero.log; fail "no ranks: exit $rc, not one line and 2"; }
  rc=0
  SLURM_SUBMIT_DIR="$WORK" VITKD="$WORK/no/vitkd" bash "$SRC/jobs/slurm.sbatch" ok.toml > nobin.log 2>&1 || rc=$?
  [ "$rc" = 2 ] && [ "$(wc -l < nobin.log)" = 1 ] && grep -q "no vitkd at '$WORK/no/vitkd' on $(hostname)" nobin.log ||
    { cat nobin.log; fail "no binary: exit $rc, not one line and 2"; }
}

e2e_main "$@"
