#!/usr/bin/env bash
# vitkd on a simulated 3-node Slurm cluster (tests/cluster/lib.sh), one case per run:
#   teardown        `cluster.sh up` then `down`, and a SIGTERM during `up`, and a SIGINT to a
#                   test holding a cluster with a job running: no namespace, link, cgroup or
#                   daemon left
#   equal           3 nodes x 1 rank, TCP between nodes, started by srun (PMIx) and by
#                   sbatch jobs/slurm.sbatch: final weights bitwise equal to 3 ranks on one node;
#                   a dataset on one node's disk only: one line naming the first node that cannot
#                   read it, before anything is written; the binary on one node only: one line
#                   naming a node without it (each such node's, as far as srun lets them finish)
#   node_loss       every process of node3 SIGKILLed (its link cut first) mid-run: Slurm marks it
#                   down, the job (sbatch --no-kill) reruns on the 2 nodes left, resuming from the
#                   newest checkpoint (3 -> 2 ranks); equal to 3 ranks stopped at that step and
#                   resumed on 2
#   slow_link       node3's link shaped with tc tbf: the run finishes, and analysis/report.py
#                   names communication as the phase that grew and node3 as the slow host
#   straggler       node3's CPU share cut (cgroup cpu quota): the report names node3 as the most
#                   imbalanced host
#   multinode.sh CASE WORK
# Environment (CTest sets it): VITKD, SRC, PYTHON, MPIEXEC, MPIEXEC_NUMPROC_FLAG. Needs root;
# where namespaces cannot be made it says why in one line and exits 77 (a skip), unless
# VITKD_REQUIRE_SLURM=1 (CI), where that fails. VITKD_CLUSTER_BREAK=CASE breaks that case's
# behaviour on purpose (docs/cluster.md), to show the test fails.
SELF=$(realpath "$0")
source "$(dirname "$0")/../lib/common.sh"
source "$(dirname "$0")/lib.sh"
[ $# -eq 2 ] || fail "usage: $0 teardown|equal|node_loss|slow_link|straggler WORK"
CASE=$1
: "${VITKD:?}" "${SRC:?}" "${PYTHON:?}" "${MPIEXEC:?}" "${MPIEXEC_NUMPROC_FLAG:?}"
T0=$(date +%s)
BREAK=${VITKD_CLUSTER_BREAK:-}
skip() {
  echo "SKIP: $* (the multi-node tests)"
  if [ "${VITKD_REQUIRE_SLURM:-0}" = 1 ]; then fail "VITKD_REQUIRE_SLURM=1, but: $*"; fi
  exit 77
}
why=$(cluster_can) || skip "$why"
require_python_modules h5py numpy
WORK=$(realpath -m "$2")
case $WORK/ in /tmp/*) fail "WORK $WORK is under /tmp, which each simulated node replaces by its own; use a folder elsewhere" ;; esac
rm -rf "$WORK" && mkdir -p "$WORK" && cd "$WORK"
CL=$WORK/cl
S=$CL/shared
finish_case() {
  local rc=$?
  cluster_down "$CL"
  echo "multinode $CASE: $(( $(date +%s) - T0 )) s in all"
  exit $rc
}
trap finish_case EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

up() {
  cluster_up "$CL" 3 || fail "the cluster did not come up (logs in $CL/log)"
  cd "$S"
  synthetic syn.h5 384 128 8 4 --seed 3
  cluster_mpi_env
  # One thread per rank everywhere: train.threads = 0 would pick 2 on a node
  # with one rank and 1 where 3 ranks share the machine, and another thread
  # count sums the matrix products in another order.
  tiny_config cfg.toml "data.path=\"$S/syn.h5\"" train.epochs=2 train.threads=1 train.timing_every_steps=1 \
    checkpoint.every_steps=0 "$@"
}
on() { local k=$1; shift; node_exec "$CL" "$k" "$@"; }
# one_node_expect CODE OUT [ARG ...]: the reference, NP (3) ranks on this machine (no
# cluster: shared memory), which must exit with CODE.
one_node_expect() {
  local code=$1 out=$2 rc=0
  shift 2
  (unset OMPI_MCA_btl OMPI_MCA_btl_tcp_if_include OMPI_MCA_oob_tcp_if_include OMPI_MCA_mpi_yield_when_idle
   export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
   timeout 120 "$MPIEXEC" "$MPIEXEC_NUMPROC_FLAG" "${NP:-3}" "$VITKD" train cfg.toml \
     --set run.out_dir="$out" "$@") > "$out.$code.log" 2>&1 || rc=$?
  [ "$rc" = "$code" ] || { cat "$out.$code.log"; fail "the one-node run $out ended $rc, not $code"; }
}
one_node() { one_node_expect 0 "$@"; }
hosts_of() { "$PYTHON" -c 'import h5py, sys; print(" ".join(h5py.File(sys.argv[1], "r").attrs["hostnames"].astype(str)))' "$1/timing.h5"; }
job_field() { on 1 scontrol -o show job "$1" | tr ' ' '\n' | sed -n "s/^$2=//p"; }
wait_job() { # JOB [S]: until the job has ended; prints its state
  local s
  for _ in $(seq $((${2:-120} * 5))); do
    s=$(job_field "$1" JobState)
    case $s in COMPLETED|CANCELLED|FAILED|TIMEOUT|NODE_FAIL|OUT_OF_MEMORY|PREEMPTED|BOOT_FAIL|DEADLINE) echo "$s"; return 0 ;; esac
    sleep 0.2
  done
  echo "$s"
}
submit() { on 1 sbatch --parsable "$@"; }

case_teardown() {
  local c=$WORK/t pid
  bash "$SRC/tests/cluster/cluster.sh" up "$c" 3 > up.log 2>&1 || { cat up.log; fail "cluster.sh up"; }
  [ "$(bash "$SRC/tests/cluster/cluster.sh" exec "$c" 1 sinfo -h -N -o %t | sort -u)" = idle ] || fail "the nodes are not idle"
  [ "$(bash "$SRC/tests/cluster/cluster.sh" exec "$c" 2 hostname)" = node2 ] || fail "node2 has another hostname"
  bash "$SRC/tests/cluster/cluster.sh" down "$c" || fail "cluster.sh down"
  [ -z "$(cluster_leftovers "$c")" ] || fail "after down: $(cluster_leftovers "$c" | tr '\n' ';')"
  echo "ok: up and down leave nothing"
  # SIGTERM while `up` starts the daemons (the configuration the first cluster
  # left would end the wait below at once)
  rm -f "$c/slurm.conf"
  bash "$SRC/tests/cluster/cluster.sh" up "$c" 3 > up2.log 2>&1 &
  pid=$!
  for _ in $(seq 300); do [ -f "$c/slurm.conf" ] && break; sleep 0.02; done
  kill -TERM "$pid"
  wait "$pid" && fail "cluster.sh up ended 0 after SIGTERM"
  [ -z "$(cluster_leftovers "$c")" ] || fail "after SIGTERM during up: $(cluster_leftovers "$c" | tr '\n' ';')"
  echo "ok: SIGTERM during up leaves nothing"
  # SIGINT to a test that holds a cluster with a job running (job control on,
  # so that the background test does not ignore SIGINT, as a shell's Ctrl-C)
  set -m
  bash "$SELF" hold "$WORK/hold" > hold.log 2>&1 &
  pid=$!
  set +m
  for _ in $(seq 600); do grep -q "^holding" hold.log && break; sleep 0.1; done
  grep -q "^holding" hold.log || { cat hold.log; fail "the held cluster never ran its job"; }
  [ -n "$(cluster_leftovers "$WORK/hold/cl")" ] || fail "the held cluster shows nothing: the leftover check is blind"
  kill -INT "$pid"
  wait "$pid" && fail "the held test ended 0 after SIGINT"
  [ -z "$(cluster_leftovers "$WORK/hold/cl")" ] ||
    fail "after SIGINT to a test with a job running: $(cluster_leftovers "$WORK/hold/cl" | tr '\n' ';')"
  echo "ok: SIGINT to a test with a job running leaves nothing"
}
case_hold() { # (for teardown) a cluster with a job running, until interrupted
  up
  submit -o hold.out --nodes=3 --ntasks-per-node=1 --wrap "srun sleep 300" > /dev/null
  for _ in $(seq 100); do [ "$(on 1 squeue -h -o %T)" = RUNNING ] && break; sleep 0.2; done
  echo "holding $(on 1 squeue -h -o '%i %T %N')"
  sleep 300 &
  wait $!
}

case_equal() {
  up
  one_node one
  on 1 timeout 120 srun -N3 -n3 --mpi=pmix "$VITKD" train cfg.toml --set run.out_dir="$S/srun" > srun.log 2>&1 ||
    { cat srun.log; fail "srun across 3 nodes"; }
  [ "$(hosts_of srun)" = "node1 node2 node3" ] || fail "srun: the ranks ran on $(hosts_of srun), not node1..3"
  cmp_ckpt one/checkpoint.h5 srun/checkpoint.h5 --exact || fail "srun on 3 nodes: not the weights of 3 ranks on one node"
  echo "ok: srun --mpi=pmix on 3 nodes: bitwise equal to 3 ranks on one node"
  local id st
  id=$(VITKD=$VITKD submit -o sbatch.out --nodes=3 --ntasks-per-node=1 "$SRC/jobs/slurm.sbatch" cfg.toml \
       --set run.out_dir="$S/sbatch") || fail "sbatch"
  st=$(wait_job "$id")
  [ "$st" = COMPLETED ] || { cat sbatch.out; fail "the sbatch job ended $st"; }
  [ "$(hosts_of sbatch)" = "node1 node2 node3" ] || fail "sbatch: the ranks ran on $(hosts_of sbatch), not node1..3"
  cmp_ckpt one/checkpoint.h5 sbatch/checkpoint.h5 --exact || fail "sbatch on 3 nodes: not the weights of 3 ranks on one node"
  echo "ok: sbatch jobs/slurm.sbatch --nodes=3: bitwise equal to 3 ranks on one node"
  # The dataset on node1's own /tmp only: one line naming the first node that cannot read it.
  on 1 cp "$S/syn.h5" /tmp/local.h5
  local rc=0
  on 1 timeout 60 srun -N3 -n3 --mpi=pmix "$VITKD" train cfg.toml --set data.path=/tmp/local.h5 \
    --set run.out_dir="$S/local" > local.log 2>&1 || rc=$?
  [ "$rc" != 0 ] && [ "$rc" != 124 ] || { cat local.log; fail "a dataset on one node's disk: exit $rc"; }
  [ "$(grep -c 'vitkd: error: data.path /tmp/local.h5 is not readable on host node2 (rank 1)' local.log)" = 1 ] ||
    { cat local.log; fail "a dataset on one node's disk: no one line naming node2"; }
  [ ! -e "$S/local" ] || fail "a dataset on one node's disk: the run folder was written"
  echo "ok: a dataset on node1's disk only: one line naming node2, nothing written"
  # The binary on node1's own /tmp only: the job script's one line for each node without it.
  on 1 cp "$VITKD" /tmp/vitkd-local
  id=$(VITKD=/tmp/vitkd-local submit -o nobin.out --nodes=3 --ntasks-per-node=1 "$SRC/jobs/slurm.sbatch" cfg.toml \
       --set run.out_dir="$S/nobin") || fail "sbatch"
  st=$(wait_job "$id")
  [ "$st" = FAILED ] || { cat nobin.out; fail "a binary on one node only: the job ended $st, not FAILED"; }
  # The first node to fail says so; srun then stops the step, which may cut
  # the other's line short: one or two lines, each naming node2 or node3.
  local lines
  lines=$(grep -c "^vitkd job: no vitkd at /tmp/vitkd-local on " nobin.out || true)
  [ "$lines" -ge 1 ] && [ "$lines" -le 2 ] &&
    [ "$(grep -c "^vitkd job: no vitkd at /tmp/vitkd-local on node[23];" nobin.out)" = "$lines" ] &&
    [ "$(grep -c "^vitkd job: no vitkd at /tmp/vitkd-local on node2;" nobin.out)" -le 1 ] &&
    [ "$(grep -c "^vitkd job: no vitkd at /tmp/vitkd-local on node3;" nobin.out)" -le 1 ] ||
    { cat nobin.out; fail "a binary on one node only: not one line for each node without it (node2, node3)"; }
  echo "ok: a binary on node1's disk only: $lines line(s) naming the node(s) without it, the job FAILED"
}

case_node_loss() {
  up checkpoint.every_steps=4
  local id st step
  # Rank 0 sleeps 100 ms a step, so that the kill comes mid-run.
  id=$(VITKD=$VITKD VITKD_GLOBAL_BATCH=12 VITKD_TEST_SLOW_RANK=0:100 submit -o loss.out --nodes=3 \
       --ntasks-per-node=1 --no-kill "$SRC/jobs/slurm.sbatch" cfg.toml --set run.out_dir="$S/loss") || fail "sbatch"
  for _ in $(seq 600); do grep -q "^step 16/64" loss.out 2> /dev/null && break; sleep 0.1; done
  grep -q "^step 16/64" loss.out || { cat loss.out; fail "the job never reached step 16"; }
  node_kill "$CL" 3
  echo "killed every process of node3 (link cut first) at $(grep -o 'step [0-9]*/' loss.out | tail -1)"
  st=$(wait_job "$id" 180)
  [ "$st" = COMPLETED ] || { cat loss.out; fail "the job ended $st after the node loss"; }
  [ "$(on 1 sinfo -h -N -n node3 -o %t)" = "down*" ] || fail "node3 is $(on 1 sinfo -h -N -n node3 -o %t), not down*"
  grep -q "^vitkd job: lost node(s) of node\[1-3\]; resuming on the 2 left (node\[1-2\])" loss.out ||
    { cat loss.out; fail "the job did not rerun on the 2 nodes left"; }
  step=$(sed -n 's/^resume: from .*(written at 3 rank(s)): step \([0-9]*\),.*/\1/p' loss.out | tail -1)
  [ -n "$step" ] && [ "$step" -gt 0 ] || { cat loss.out; fail "no resume from a step > 0 written at 3 ranks"; }
  [ "$(json_get loss/result.json world_size)" = 2 ] || fail "the resumed run is not 2 ranks"
  [ "$(json_get loss/result.json steps)" = 64 ] || fail "the resumed run did not finish its 64 steps"
  echo "ok: node3 down, the job reran on node[1-2] from step $step (3 -> 2 ranks) and completed"
  # The same path without the kill: 3 ranks stopped at that step, resumed on 2.
  VITKD_TEST_PREEMPT_AT_STEP=$step one_node_expect 75 path --set data.batch_size=4
  NP=2 one_node_expect 0 path --set data.batch_size=6
  cmp_ckpt path/checkpoint.h5 loss/checkpoint.h5 --exact || fail "not the weights of 3 ranks stopped at step $step and resumed on 2"
  echo "ok: bitwise equal to 3 ranks on one node stopped at step $step and resumed on 2"
}

# report_line RUN_DIR... : analysis/report.py on the runs (report in ./report), its stdout in report.txt
report_on() { "$PYTHON" "$SRC/analysis/report.py" "$@" --out "$S/report" > report.txt || fail "report.py failed"; }
# host_ratio NAME: from report.txt, "HOST RATIO" of the line "NAME: HOST (... RATIOx the ...)"
host_ratio() { sed -n "s/^$1: \(\S*\) (.* \([0-9.]*\)x the m[a-z]* host)$/\1 \2/p" report.txt; }

case_slow_link() {
  up train.epochs=1
  local hr
  on 1 timeout 120 srun -N3 -n3 --mpi=pmix "$VITKD" train cfg.toml --set run.out_dir="$S/base" > base.log 2>&1 ||
    { cat base.log; fail "the unshaped run"; }
  # 2 Mbit/s to node3: a step's exchange (a few kB each way per rank) takes tens of ms.
  node_slow_link "$CL" 3 2mbit || fail "tc could not shape node3's link (tc qdisc add ... tbf)"
  on 1 timeout 120 srun -N3 -n3 --mpi=pmix "$VITKD" train cfg.toml --set run.out_dir="$S/slow" > slow.log 2>&1 ||
    { cat slow.log; fail "the run over the slow link did not finish"; }
  report_on base slow
  grep "^Grew most\|^Most communication-bound host" report.txt
  grep -q "^Grew most from base to slow: communication " report.txt || fail "the report does not name communication as grown"
  hr=$(host_ratio "Most communication-bound host" | tail -1)
  [ "${hr%% *}" = node3 ] || fail "the report names '${hr%% *}', not node3, as the most communication-bound host"
  "$PYTHON" -c 'import sys; sys.exit(float(sys.argv[1]) < 1.5)' "${hr##* }" ||
    fail "node3 is only ${hr##* }x the median host's communication (want >= 1.5)"
  echo "ok: communication grew, node3 named as the slow host (${hr##* }x the median host)"
}

case_straggler() {
  up train.epochs=1
  local hr
  # node3's processes (slurmd, and so its tasks) get 10% of one CPU: 1 ms every 10 ms.
  node_slow_cpu "$CL" 3 10 || fail "no cpu cgroup for node3"
  on 1 timeout 120 srun -N3 -n3 --mpi=pmix "$VITKD" train cfg.toml --set run.out_dir="$S/strag" > strag.log 2>&1 ||
    { cat strag.log; fail "the run with a straggler node did not finish"; }
  report_on strag
  grep "^Most imbalanced" report.txt
  hr=$(host_ratio "Most imbalanced host")
  [ "${hr%% *}" = node3 ] || fail "the report names '${hr%% *}', not node3, as the most imbalanced host"
  "$PYTHON" -c 'import sys; sys.exit(float(sys.argv[1]) < 1.3)' "${hr##* }" ||
    fail "node3 is only ${hr##* }x the mean host (want >= 1.3)"
  echo "ok: node3 named as the most imbalanced host (${hr##* }x the mean host)"
}

case "$CASE" in
  teardown|hold|equal|node_loss|slow_link|straggler) "case_$CASE" ;;
  *) fail "no case '$CASE' in $0" ;;
esac
echo "OK: multinode $CASE"
