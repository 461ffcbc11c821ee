#!/usr/bin/env bash
# jobs/slurm.sbatch under a real one-node Slurm (slurmctld, slurmd, munged),
# started here under WORK (the first argument) and always stopped:
#   world               2 ranks started by srun form one MPI world (with MpiDefault=none:
#                       the script's own srun --mpi=pmix does it)
#   usr1_mid_run        scancel --signal=USR1 --batch: checkpoint, exit 75, requeue,
#                       resume, COMPLETED
#   cancel              scancel: CANCELLED, not requeued, the last checkpoint intact
#   usr1_in_start_up    SIGUSR1 while the ranks start (before MPI_Init): not lost, the job
#                       checkpoints after its first step, requeues and completes
#   usr1_at_start       SIGUSR1 to the batch shell as soon as it prints its first line, and
#                       0.3, 1 and 2 s later (srun starting the step, the ranks loading
#                       LibTorch before main): never a task killed by the signal; each job
#                       checkpoints (exit 75), requeues once and completes
#   time_limit          --time=2 with --signal=B:USR1@100: Slurm's own warning, requeue,
#                       resume, COMPLETED
#   missing_plugin      SLURM_MPI_TYPE naming a plugin Slurm lacks: srun's error and one vitkd line
#   no_configuration    sbatch without a configuration: one usage line, exit 2
# Needs root, slurm-wlm and munge (jobs/setup.sh installs them) and nothing
# else: it installs nothing. Where the daemons cannot run it says why and
# exits 77 (a skip), unless VITKD_REQUIRE_SLURM=1 (CI), where that fails.
# A requeued job waits for the job credential to expire (BeginTime), 120 s
# unless AuthInfo sets cred_expire: 10 s here. (Moving its start earlier with
# scontrol update StartTime=now makes Slurm kill it: "Job credential revoked".)
# Environment: VITKD, SRC, PYTHON (CTest sets them, as for tests/e2e/e2e_*.sh);
# VITKD_SLURM_SCRIPT: another job script to test than $SRC/jobs/slurm.sbatch.
#   slurm_cluster.sh WORK
source "$(dirname "$0")/../lib/common.sh"
source "$(dirname "$0")/../lib/slurm.sh"
[ $# -eq 1 ] || fail "usage: $0 WORK"
: "${VITKD:?}" "${SRC:?}" "${PYTHON:?}"
WORK=$1
T0=$(date +%s)
SCRIPT=${VITKD_SLURM_SCRIPT:-$SRC/jobs/slurm.sbatch}

skip() {
  echo "SKIP: $* (the real Slurm test)"
  if [ "${VITKD_REQUIRE_SLURM:-0}" = 1 ]; then fail "VITKD_REQUIRE_SLURM=1, but: $*"; fi
  exit 77
}
for c in munged mungekey slurmctld slurmd sbatch srun scontrol scancel; do
  command -v "$c" > /dev/null || skip "no '$c' on PATH (Debian: slurm-wlm and munge; jobs/setup.sh installs them)"
done
[ "$(id -u)" = 0 ] || skip "slurmd must run as root to start jobs, and this is uid $(id -u)"
require_python_modules h5py numpy

rm -rf "$WORK" && mkdir -p "$WORK" && cd "$WORK"
W=$PWD
mkdir -p munge state spool log run
chmod 755 "$W" munge

# ---- the cluster -------------------------------------------------------------
PIDS=()
stop_cluster() {
  local rc=$?
  # The usr1_at_start watchers (background subshells), should the test end early.
  if [ -n "${watchers[*]:-}" ]; then kill "${watchers[@]}" 2> /dev/null || true; fi
  if [ -f slurm.conf ] && [ -f slurmctld.pid ]; then
    scancel --quiet --full $(squeue -h -o %i 2> /dev/null) 2> /dev/null || true
    for _ in $(seq 30); do [ -z "$(squeue -h 2> /dev/null)" ] && break; sleep 0.5; done
  fi
  local f p
  for f in slurmd.pid slurmctld.pid munge/munged.pid; do  # munged last: the others use it
    [ -f "$f" ] && p=$(cat "$f") || continue
    kill "$p" 2> /dev/null || continue
    for _ in $(seq 40); do kill -0 "$p" 2> /dev/null || break; sleep 0.25; done
    kill -KILL "$p" 2> /dev/null || true
  done
  echo "slurm_cluster: $(( $(date +%s) - T0 )) s in all"
  exit $rc
}
trap stop_cluster EXIT

mungekey --create --keyfile="$W/munge/munge.key" > /dev/null 2>&1 || skip "mungekey could not make a key"
munged --force --socket="$W/munge/sock" --key-file="$W/munge/munge.key" --log-file="$W/munge/munged.log" \
  --pid-file="$W/munge/munged.pid" --seed-file="$W/munge/munged.seed" --num-threads=2 2> log/munged.err ||
  skip "munged did not start: $(tail -1 log/munged.err)"

read -r CTLD_PORT SLURMD_PORT < <("$PYTHON" -c '
import socket
s = [socket.socket() for _ in range(2)]
for x in s: x.bind(("127.0.0.1", 0))
print(*[x.getsockname()[1] for x in s])')
NODE=$(hostname -s)
# CPUs beyond the machine's (config_overrides): jobs run side by side, as the
# cases' tiny models allow. MpiDefault=none, Slurm's own default: the job
# script must choose the plugin itself.
cat > slurm.conf <<EOF
ClusterName=vitkdtest
SlurmctldHost=$NODE(127.0.0.1)
SlurmUser=root
SlurmdUser=root
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
AuthType=auth/munge
AuthInfo=socket=$W/munge/sock,cred_expire=10
CredType=cred/munge
StateSaveLocation=$W/state
SlurmdSpoolDir=$W/spool
SlurmctldPidFile=$W/slurmctld.pid
SlurmdPidFile=$W/slurmd.pid
SlurmctldLogFile=$W/log/slurmctld.log
SlurmdLogFile=$W/log/slurmd.log
SlurmdParameters=config_overrides
$(slurm_conf_test_cluster)
KillWait=10
MinJobAge=600
InactiveLimit=0
NodeName=$NODE NodeAddr=127.0.0.1 CPUs=8 State=UNKNOWN
PartitionName=test Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
EOF
export SLURM_CONF=$W/slurm.conf
unset SLURM_JOB_ID SLURM_NTASKS SLURM_MPI_TYPE SLURM_CPUS_PER_TASK
slurmctld -i 2> log/slurmctld.err || skip "slurmctld did not start: $(tail -1 log/slurmctld.err)"
slurmd 2> log/slurmd.err || skip "slurmd did not start: $(tail -1 log/slurmd.err)"
up=0
for _ in $(seq 60); do
  if [ "$(sinfo -h -o %t 2> /dev/null)" = idle ]; then up=1; break; fi
  sleep 0.5
done
[ $up = 1 ] || skip "the node did not come up: $(sinfo 2>&1 | tail -1); $(tail -1 log/slurmd.log 2> /dev/null)"
echo "slurm_cluster: $(slurmctld -V) up: slurmctld pid $(cat slurmctld.pid), slurmd pid $(cat slurmd.pid)," \
     "munged pid $(cat munge/munged.pid)"
srun --mpi=list 2>&1 | grep -qw pmix || skip "this Slurm has no pmix plugin, which Debian's OpenMPI needs"

# ---- helpers -------------------------------------------------------------------
synthetic syn.h5 384 128 8 4 --seed 3
tiny_config cfg.toml train.epochs=2 checkpoint.every_steps=4
# The first run of a job (SLURM_RESTART_COUNT unset or 0) gets FIRST_RUN's
# variables; a requeued run runs at full speed.
cat > vitkd-first-run <<EOF
#!/usr/bin/env bash
if [ "\${SLURM_RESTART_COUNT:-0}" = 0 ] && [ -n "\${FIRST_RUN:-}" ]; then export \$FIRST_RUN; fi
exec "$VITKD" "\$@"
EOF
chmod +x vitkd-first-run

# submit NAME [sbatch option ...] -- [script argument ...]: prints the job id.
submit() {
  local name=$1 opts=()
  shift
  while [ $# -gt 0 ] && [ "$1" != -- ]; do opts+=("$1"); shift; done
  shift
  (cd "$W" && VITKD="$W/vitkd-first-run" sbatch --parsable -J "$name" -o "$W/$name.out" "${opts[@]}" \
     "$SCRIPT" "$@")
}
field() { scontrol -o show job "$1" | tr ' ' '\n' | sed -n "s/^$2=//p"; }
# wait_out JOB PATTERN [N]: until the job's output holds N (default 1) lines
# with PATTERN (at most 120 s).
wait_out() {
  local out
  out=$W/$(field "$1" JobName).out
  local n
  for _ in $(seq 600); do
    n=$(grep -c -- "$2" "$out" 2> /dev/null) || n=0  # exit 1: no match yet, or no file yet
    [ "${n:-0}" -ge "${3:-1}" ] && return 0
    sleep 0.2
  done
  cat "$out"
  fail "job $1: no '$2' in its output"
}
# finish JOB STATE [RESTARTS]: waits until the job ends (at most 180 s); fails
# unless it ends in STATE (after RESTARTS requeues, if given; N+: at least N).
finish() {
  local id=$1 want=$2 restarts=${3-} state
  for _ in $(seq 900); do
    state=$(field "$id" JobState)
    case $state in COMPLETED|CANCELLED|FAILED|TIMEOUT|NODE_FAIL|OUT_OF_MEMORY|PREEMPTED|BOOT_FAIL|DEADLINE) break ;; esac
    sleep 0.2
  done
  local out
  out=$W/$(field "$id" JobName).out
  if [ "$state" != "$want" ]; then
    cat "$out"
    scontrol show job "$id"
    fail "job $id ($(field "$id" JobName)) ended $state (exit $(field "$id" ExitCode)), not $want"
  fi
  local got bad=0
  got=$(field "$id" Restarts)
  if [ -n "$restarts" ]; then
    if [ "${restarts%+}" != "$restarts" ]; then
      [ "$got" -ge "${restarts%+}" ] || bad=1
    else
      [ "$got" = "$restarts" ] || bad=1
    fi
  fi
  if [ $bad = 1 ]; then
    cat "$out"
    fail "job $id ($(field "$id" JobName)): $(field "$id" Restarts) restarts, not $restarts"
  fi
  echo "ok: job $id ($(field "$id" JobName)) $state after $(field "$id" Restarts) restart(s)"
}
ckpt_step() { "$PYTHON" -c 'import h5py, sys; print(int(h5py.File(sys.argv[1], "r").attrs["step"]))' "$1"; }

# ---- the cases ----------------------------------------------------------------
# All jobs are submitted at once and run side by side; each case acts on its
# job when the job's output shows it is ready.
# time_limit: slow enough (0.6 s a step, 144 steps) to outlast the ~20 s
# before Slurm's warning (100 s before its 2-minute limit; slurmctld looks
# every few seconds), and for its requeued run to finish unwarned unless the
# machine is busy (then it is warned and requeued again: 1+ restarts).
tl=$(FIRST_RUN=VITKD_TEST_SLOW_RANK=0:600 submit time_limit --time=2 --signal=B:USR1@100 -- cfg.toml \
       --set run.out_dir=run/time_limit --set train.epochs=3) || fail "sbatch"
st=$(FIRST_RUN=VITKD_TEST_START_PAUSE_MS=8000 submit usr1_in_start_up -- cfg.toml --set run.out_dir=run/start) ||
  fail "sbatch"
u1=$(FIRST_RUN=VITKD_TEST_SLOW_RANK=0:150 submit usr1_mid_run -- cfg.toml --set run.out_dir=run/usr1) || fail "sbatch"
cn=$(FIRST_RUN=VITKD_TEST_SLOW_RANK=0:300 submit cancel -- cfg.toml --set run.out_dir=run/cancel) || fail "sbatch"
mp=$(SLURM_MPI_TYPE=pmix_v9 submit missing_plugin -- cfg.toml --set run.out_dir=run/plugin) || fail "sbatch"
nc=$(submit no_configuration --) || fail "sbatch"
# usr1_at_start: one job per delay, each signalled by a watcher of its own.
# Their first run is slowed (0.3 s a step, about 14 s an epoch) so that it
# cannot end before its signal on a quiet machine; the requeued run is not.
AT_START_DELAYS=(0 0.3 1 2)
at_start=() watchers=()
for d in "${AT_START_DELAYS[@]}"; do
  id=$(FIRST_RUN=VITKD_TEST_SLOW_RANK=0:300 submit "usr1_at_start_$d" -- cfg.toml --set run.out_dir="run/at_start_$d" \
         --set train.epochs=1) || fail "sbatch"
  at_start+=("$id")
  (
    for _ in $(seq 7500); do grep -q "^vitkd job" "usr1_at_start_$d.out" 2> /dev/null && break; sleep 0.02; done
    sleep "$d"
    scancel --signal=USR1 --batch "$id"
  ) &
  watchers+=($!)
done

# usr1_in_start_up: the signal comes while every rank pauses before MPI_Init.
wait_out "$st" "test fault: start-up pause" 2  # both ranks are in main
sleep 1
scancel --signal=USR1 --batch "$st"
# usr1_mid_run
wait_out "$u1" "^setup took"
sleep 1
scancel --signal=USR1 --batch "$u1"
# cancel, once there is a periodic checkpoint
for _ in $(seq 600); do [ -f run/cancel/checkpoint.h5 ] && break; sleep 0.2; done
[ -f run/cancel/checkpoint.h5 ] || { cat cancel.out; fail "cancel: no periodic checkpoint"; }
scancel "$cn"

finish "$st" COMPLETED 1
grep -q "preempted (SIGTERM/SIGUSR1) after step 1:" usr1_in_start_up.out ||
  { cat usr1_in_start_up.out; fail "usr1_in_start_up: no checkpoint after the first step"; }
echo "ok: usr1_in_start_up"

finish "$u1" COMPLETED 1
grep -q "exiting with code 75" usr1_mid_run.out || { cat usr1_mid_run.out; fail "no checkpoint on SIGUSR1"; }
grep -q "resume: from run/usr1/checkpoint.h5" usr1_mid_run.out || { cat usr1_mid_run.out; fail "no resume"; }
[ "$(json_get run/usr1/result.json world_size)" = 2 ] || fail "world: not 2 ranks in one world"
[ "$(json_get run/usr1/result.json epochs)" = 2 ] || fail "the resumed run did not finish"
echo "ok: world (2 ranks, one world) and usr1_mid_run"

finish "$cn" CANCELLED 0
sleep 2
[ "$(field "$cn" JobState)" = CANCELLED ] && [ "$(field "$cn" Restarts)" = 0 ] ||
  fail "cancel: job $cn is $(field "$cn" JobState) after $(field "$cn" Restarts) restarts: requeued"
step=$(ckpt_step run/cancel/checkpoint.h5) || fail "cancel: checkpoint.h5 is not readable"
[ "$step" -ge 4 ] || fail "cancel: checkpoint.h5 at step $step"
echo "ok: cancel (CANCELLED, not requeued, checkpoint.h5 at step $step readable)"

finish "$mp" FAILED
grep -q "srun: error: .*pmix_v9" missing_plugin.out || { cat missing_plugin.out; fail "missing_plugin: no srun error"; }
[ "$(grep -c "^vitkd job: this Slurm has no MPI plugin 'pmix_v9'.*set SLURM_MPI_TYPE" missing_plugin.out)" = 1 ] ||
  { cat missing_plugin.out; fail "missing_plugin: not one vitkd line saying what to set"; }
echo "ok: missing_plugin"

finish "$nc" FAILED
[ "$(field "$nc" ExitCode)" = 2:0 ] && [ "$(wc -l < no_configuration.out)" = 1 ] &&
  grep -q "^usage: sbatch jobs/slurm.sbatch CONFIG.toml" no_configuration.out ||
  { cat no_configuration.out; fail "no_configuration: exit $(field "$nc" ExitCode), not one usage line and 2"; }
echo "ok: no_configuration"

for i in "${!watchers[@]}"; do
  wait "${watchers[i]}" ||
    fail "usr1_at_start (${AT_START_DELAYS[i]} s): could not signal job ${at_start[i]} (never started, or already ended)"
done
for i in "${!AT_START_DELAYS[@]}"; do
  d=${AT_START_DELAYS[i]}
  out=usr1_at_start_$d.out
  finish "${at_start[i]}" COMPLETED 1
  # srun's line for tasks a signal killed (e.g. "srun: error: vm: tasks 0-1: User defined signal 1").
  # (A bare "Terminated" is the batch shell ended by its own requeue, which is expected.)
  ! grep -qE "tasks? [0-9,-]+: (User defined signal 1|Terminated)" "$out" ||
    { cat "$out"; fail "usr1_at_start ($d s): a task killed by the signal"; }
  grep -q "^vitkd job: checkpointed before the time limit; requeueing" "$out" ||
    { cat "$out"; fail "usr1_at_start ($d s): no checkpoint and requeue"; }
  [ "$(json_get "run/at_start_$d/result.json" epochs)" = 1 ] || fail "usr1_at_start ($d s): the requeued run did not finish"
done
echo "ok: usr1_at_start (SIGUSR1 at ${AT_START_DELAYS[*]} s after the job's first line: checkpoint, requeue, COMPLETED)"

finish "$tl" COMPLETED 1+
grep -q "vitkd job: time limit near" time_limit.out || { cat time_limit.out; fail "time_limit: no warning"; }
[ "$(json_get run/time_limit/result.json epochs)" = 3 ] || fail "time_limit: the resumed run did not finish"
echo "ok: time_limit"
echo "OK: slurm_cluster"
