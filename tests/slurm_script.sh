#!/usr/bin/env bash
# jobs/slurm.sbatch under stand-ins for srun and scontrol: the time-limit
# signal (SIGUSR1 to the batch shell, as --signal=B:USR1@120 sends it) must
# reach the ranks, which checkpoint and exit 75, and the script must then
# requeue the job; the requeued run resumes and finishes.
#   slurm_script.sh WORKDIR    (env: VITKD, MPIEXEC, MPIEXEC_NUMPROC_FLAG, SRC, PYTHON)
set -euo pipefail
work=$1
rm -rf "$work" && mkdir -p "$work/bin" && cd "$work"
fail() { echo "FAIL: $*"; exit 1; }
# srun: drop its options, start the ranks with the MPI launcher (which
# forwards SIGUSR1 to them, as srun does).
cat > bin/srun <<SH
#!/usr/bin/env bash
while [ \$# -gt 0 ] && [ "\${1#--}" != "\$1" ]; do shift; done
exec $MPIEXEC $MPIEXEC_NUMPROC_FLAG 2 $MPIEXEC_PREFLAGS "\$@"
SH
printf '#!/usr/bin/env bash\necho "$@" >> %s/scontrol.calls\n' "$work" > bin/scontrol
chmod +x bin/srun bin/scontrol
"$VITKD" prepare synthetic --out syn.h5 --train 384 --test 128 --size 8 --classes 4 --seed 3 > /dev/null
export PATH="$work/bin:$PATH" SLURM_JOB_ID=4242 SLURM_NTASKS=2 SLURM_CPUS_PER_TASK=1 SLURM_SUBMIT_DIR="$work"

ARGS=("$SRC/inputs/smoke.toml" --set data.path=syn.h5 --set run.out_dir=run --set model.dim=16
      --set model.depth=1 --set model.image_size=8 --set data.batch_size=4 --set train.epochs=2
      --set train.mfu_ceiling=1e11)

VITKD_TEST_SLOW_RANK=0:100 VITKD="$VITKD" bash "$SRC/jobs/slurm.sbatch" "${ARGS[@]}" > job1.log 2>&1 &
job=$!
for _ in $(seq 150); do grep -q "^setup took" job1.log && break; sleep 0.2; done
sleep 1
kill -USR1 $job
set +e
wait $job
rc=$?
set -e
[ "$rc" = 0 ] || { cat job1.log; fail "the batch script exited with $rc after requeueing"; }
grep -q "exiting with code 75" job1.log || { cat job1.log; fail "the ranks did not checkpoint on SIGUSR1"; }
grep -qx "requeue 4242" scontrol.calls || fail "no 'scontrol requeue 4242'"
# The requeued job resumes and finishes (exit 0, no second requeue).
VITKD="$VITKD" bash "$SRC/jobs/slurm.sbatch" "${ARGS[@]}" > job2.log 2>&1 || { cat job2.log; fail "requeued run"; }
grep -q "resume: from run/checkpoint.h5" job2.log || { cat job2.log; fail "the requeued run did not resume"; }
[ "$(wc -l < scontrol.calls)" = 1 ] || fail "requeued more than once"
"$PYTHON" -c "import json; r = json.load(open('run/result.json')); assert r['epochs'] == 2 and r['world_size'] == 2"
echo "OK: slurm.sbatch forwards the time-limit signal, requeues on 75, and the requeued run resumes"
