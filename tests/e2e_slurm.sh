#!/usr/bin/env bash
# jobs/slurm.sbatch under stand-ins for srun and scontrol, at 2 ranks:
#   usr1_checkpoints_requeues_and_resumes   the time-limit signal (SIGUSR1 to the batch shell, as
#                                           --signal=B:USR1@120 sends it) reaches the ranks, which
#                                           checkpoint and exit 75; the script requeues the job;
#                                           the requeued run resumes and finishes
#   e2e_slurm.sh --list | CASE NP ROOT    (tests/lib/common.sh)
source "$(dirname "$0")/lib/common.sh"
CASES=(usr1_checkpoints_requeues_and_resumes)

case_usr1_checkpoints_requeues_and_resumes() {
  mkdir -p bin
  # srun: drop its options, start the ranks with the MPI launcher (which
  # forwards SIGUSR1 to them, as srun does) and hand them the SLURM_* and
  # VITKD_TEST_* variables through env (srun exports the environment).
  cat > bin/srun <<SH
#!/usr/bin/env bash
while [ \$# -gt 0 ] && [ "\${1#--}" != "\$1" ]; do shift; done
fwd=()
for v in \${!SLURM_@} \${!VITKD_TEST_@}; do fwd+=("\$v=\${!v}"); done
exec $MPIEXEC $MPIEXEC_NUMPROC_FLAG $NP ${MPIEXEC_PREFLAGS-} env "\${fwd[@]}" "\$@"
SH
  printf '#!/usr/bin/env bash\necho "$@" >> %s/scontrol.calls\n' "$WORK" > bin/scontrol
  chmod +x bin/srun bin/scontrol
  synthetic syn.h5 384 128 8 4 --seed 3
  export PATH="$WORK/bin:$PATH" SLURM_JOB_ID=4242 SLURM_NTASKS=$NP SLURM_CPUS_PER_TASK=1 SLURM_SUBMIT_DIR="$WORK"
  local args=("$SRC/inputs/smoke.toml" --set data.path=syn.h5 --set run.out_dir=run --set model.dim=16
              --set model.depth=1 --set model.image_size=8 --set data.batch_size=4 --set train.epochs=2
              --set train.mfu_ceiling=1e11)
  # The slow rank gives the signal time to arrive mid-run.
  VITKD_TEST_SLOW_RANK=0:100 VITKD="$VITKD" bash "$SRC/jobs/slurm.sbatch" "${args[@]}" > job1.log 2>&1 &
  local job=$! rc=0
  for _ in $(seq 150); do grep -q "^setup took" job1.log && break; sleep 0.2; done
  sleep 1
  kill -USR1 $job
  wait $job || rc=$?
  [ "$rc" = 0 ] || { cat job1.log; fail "the batch script exited with $rc after requeueing"; }
  grep -q "exiting with code 75" job1.log || { cat job1.log; fail "the ranks did not checkpoint on SIGUSR1"; }
  grep -qx "requeue 4242" scontrol.calls || fail "no 'scontrol requeue 4242'"
  # The requeued job resumes and finishes (exit 0, no second requeue).
  VITKD="$VITKD" bash "$SRC/jobs/slurm.sbatch" "${args[@]}" > job2.log 2>&1 || { cat job2.log; fail "requeued run"; }
  grep -q "resume: from run/checkpoint.h5" job2.log || { cat job2.log; fail "the requeued run did not resume"; }
  [ "$(wc -l < scontrol.calls)" = 1 ] || fail "requeued more than once"
  "$PYTHON" -c "import json; r = json.load(open('run/result.json')); assert r['epochs'] == 2 and r['world_size'] == $NP"
}

e2e_main "$@"
