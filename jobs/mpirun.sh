#!/usr/bin/env bash
# vitkd on a workstation (or one node without Slurm), with mpirun.
#   NP=2 jobs/mpirun.sh inputs/fmnist-distill.toml [--set section.key=value ...]
# NP ranks (default 2) with one compute thread each, unless THREADS says
# otherwise. Ctrl-C or `kill -USR1 <mpirun pid>` makes vitkd checkpoint and
# exit with 75; run the same command again to resume (checkpoint.resume =
# "auto"). With RESTART=1 the script does that itself after a 75.
set -uo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 1 ] || { echo "usage: NP=2 jobs/mpirun.sh CONFIG.toml [--set k=v ...]" >&2; exit 2; }
source jobs/env.sh
NP=${NP:-2}
THREADS=${THREADS:-1}
export OMP_NUM_THREADS=$THREADS
VITKD=${VITKD:-build/vitkd}
[ -x "$VITKD" ] || bash jobs/build.sh
while true; do
  mpirun -n "$NP" --bind-to none "$VITKD" train "$1" --set train.threads="$THREADS" "${@:2}"
  rc=$?
  if [ "$rc" -eq 75 ] && [ "${RESTART:-0}" = 1 ]; then
    echo "mpirun.sh: preempted (exit 75); resuming"
    continue
  fi
  exit "$rc"
done
