#!/usr/bin/env bash
# A simulated Slurm cluster on this machine, by hand (root; tests/cluster/lib.sh
# says how it is made: one network + UTS + mount namespace per node, a bridge,
# munged and slurmd on every node, slurmctld on node1).
#   cluster.sh up DIR [N]           N nodes (default 3), node1..nodeN at 10.213.0.1..N;
#                                   DIR (not under /tmp) holds the configuration, the logs
#                                   and DIR/shared, seen by every node (put data and runs there)
#   cluster.sh exec DIR K CMD ...   CMD on node K, with SLURM_CONF set and the cluster's
#                                   OpenMPI settings exported (e.g. sinfo, sbatch, srun)
#   cluster.sh shell DIR [K]        an interactive shell on node K (default 1)
#   cluster.sh down DIR             stops every process of every node, removes the
#                                   namespaces, links and cgroups (also after a failed up)
# A job, e.g. (from the repository root):
#   tests/cluster/cluster.sh up /work/cl
#   build/vitkd prepare synthetic --out /work/cl/shared/syn.h5 --train 384 --test 128 --size 8 --classes 4
#   cd /work/cl/shared && VITKD=$OLDPWD/build/vitkd $OLDPWD/tests/cluster/cluster.sh exec /work/cl 1 \
#     sbatch --nodes=3 --ntasks-per-node=1 $OLDPWD/jobs/slurm.sbatch CONFIG.toml
#   tests/cluster/cluster.sh exec /work/cl 1 squeue
#   tests/cluster/cluster.sh down /work/cl
# Where namespaces cannot be made (not root, no CAP_NET_ADMIN) `up` says why in one line and exits 77.
set -euo pipefail
# shellcheck source=tests/cluster/lib.sh
source "$(dirname "$0")/lib.sh"
usage() { echo "usage: $0 up DIR [N] | exec DIR K CMD ... | shell DIR [K] | down DIR" >&2; exit 2; }
[ $# -ge 2 ] || usage
cmd=$1 dir=$2
shift 2
case $cmd in
  up)
    why=$(cluster_can) || { echo "cluster: cannot start a cluster here: $why" >&2; exit 77; }
    trap 'cluster_down "$dir"; exit 1' INT TERM
    cluster_up "$dir" "${1:-3}" || { rc=$?; cluster_down "$dir"; exit "$rc"; }  # (after `if !`, $? would be 0)
    trap - INT TERM
    source "$dir/cluster.env"
    echo "cluster: $NODES node(s) up in $CL (shared folder $CL/shared); node1 runs slurmctld;" \
         "'$0 exec $CL 1 sinfo' to look, '$0 down $CL' to stop"
    ;;
  exec)
    [ $# -ge 2 ] || usage
    k=$1
    shift
    cluster_env "$dir"
    [ "$k" -ge 1 ] 2> /dev/null && [ "$k" -le "$NODES" ] || { echo "cluster: no node '$k' (1..$NODES)" >&2; exit 2; }
    cluster_mpi_env
    node_exec "$dir" "$k" "$@"
    ;;
  shell)
    cluster_env "$dir"
    cluster_mpi_env
    node_exec "$dir" "${1:-1}" bash -i
    ;;
  down)
    cluster_down "$dir"
    left=$(cluster_leftovers "$dir")
    [ -z "$left" ] || { echo "cluster: left behind: $(echo "$left" | tr '\n' ';')" >&2; exit 1; }
    ;;
  *) usage ;;
esac
