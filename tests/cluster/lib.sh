# A simulated Slurm cluster on one machine (sourced by tests/cluster/cluster.sh
# and tests/cluster/multinode.sh). Each node is a network namespace (its own
# address on a bridge), with its own hostname (UTS namespace) and its own /tmp
# and /etc/hosts (mount namespace), held open by one `sleep` per node; every
# daemon and task of the node runs in those namespaces (node_exec). Node 1 is
# also the head: slurmctld runs there, and so do the users' commands (sbatch,
# srun, squeue). Each node runs its own munged (socket in its own /tmp) and
# slurmd; the key is the same on every node, as on a real cluster. The folder
# CL (the cluster's directory, never under /tmp: the nodes have their own) is
# seen by every node, as an NFS home would be: the run folders live there.
#
#   cluster_up CL [N]         starts N nodes (default 3); writes CL/cluster.env
#   cluster_down CL           stops all of it (idempotent, also after a partial up)
#   node_exec CL K CMD ...    CMD on node K (SLURM_CONF set)
#   node_kill CL K            SIGKILL to every process of node K (after cutting its link)
#   node_slow_link CL K RATE [both]  shapes node K's link (to it; both: also from it) with tbf
#   node_slow_cpu CL K PCT    node K's processes (and their children) get PCT % of one CPU
#
# Names: namespaces, links and cgroups start with "vkc<ID>" (ID: 4 digits from
# the cluster's directory), so that two clusters (different CL) can coexist.
# Addresses: 10.213.0.K/24 on node K, on a bridge with no address on the host:
# nothing reaches the host's own network.
source "$(dirname "${BASH_SOURCE[0]}")/../lib/slurm.sh"
CLUSTER_NET=10.213.0
CLUSTER_CTLD_PORT=6917
CLUSTER_SLURMD_PORT=6918
CLUSTER_CGROUP_ROOT=/sys/fs/cgroup/cpu

cluster_fail() { echo "cluster: $*" >&2; return 1; }

# cluster_names CL: sets CID (name prefix) from the directory.
cluster_names() {
  local h
  h=$(printf '%s' "$(realpath -m "$1")" | cksum | cut -d' ' -f1)
  CID=vkc$((h % 10000))
}

cluster_env() { # CL: loads CL/cluster.env
  [ -f "$1/cluster.env" ] || cluster_fail "no cluster in $1 (no cluster.env): start one with 'tests/cluster/cluster.sh up $1'"
  # shellcheck disable=SC1091
  source "$1/cluster.env"
}

# cluster_can: one line on stdout and status 1 where this machine cannot hold a cluster.
cluster_can() {
  local c
  for c in ip tc unshare nsenter munged mungekey slurmctld slurmd sbatch srun scontrol; do
    command -v "$c" > /dev/null || { echo "no '$c' on PATH (Debian: iproute2, util-linux, slurm-wlm, munge)"; return 1; }
  done
  [ "$(id -u)" = 0 ] || { echo "namespaces and slurmd need root, and this is uid $(id -u)"; return 1; }
  local probe=vkcprobe$$
  if ! ip netns add "$probe" 2> /dev/null; then echo "cannot create a network namespace (no CAP_NET_ADMIN?)"; return 1; fi
  ip netns del "$probe"
  if ! unshare --uts --mount true 2> /dev/null; then echo "cannot create UTS and mount namespaces (unshare failed)"; return 1; fi
  return 0
}

node_pid() { cat "$1/nodes/node$2/holder.pid"; }

node_exec() {
  local cl=$1 k=$2
  shift 2
  nsenter -t "$(node_pid "$cl" "$k")" -n -u -m --wd="$PWD" env SLURM_CONF="$cl/slurm.conf" VKC_CLUSTER="$cl" "$@"
}

cluster_up() {
  local cl n=${2:-3} k
  cl=$(realpath -m "$1")
  case $cl/ in /tmp/*) cluster_fail "$cl is under /tmp, which each node replaces by its own: use a folder elsewhere (e.g. under the build directory)"; return 1 ;; esac
  [ "$n" -ge 1 ] 2> /dev/null && [ "$n" -le 32 ] || { cluster_fail "node count '$n': 1 to 32"; return 1; }
  if [ -f "$cl/cluster.env" ]; then cluster_fail "$cl already holds a cluster: 'tests/cluster/cluster.sh down $cl' first"; return 1; fi
  cluster_names "$cl"
  mkdir -p "$cl/log" "$cl/state" "$cl/shared"
  cat > "$cl/cluster.env" <<EOF
CL=$cl
CID=$CID
NODES=$n
EOF
  # /etc/hosts of every node: the nodes by name.
  { echo "127.0.0.1 localhost"; for k in $(seq "$n"); do echo "$CLUSTER_NET.$k node$k"; done; } > "$cl/hosts"
  ip link add "${CID}br" type bridge || return 1
  ip link set "${CID}br" up
  for k in $(seq "$n"); do
    local nd=$cl/nodes/node$k
    mkdir -p "$nd/tmp" "$nd/spool"
    chmod 1777 "$nd/tmp"
    ip netns add "${CID}n$k" || return 1
    ip link add "${CID}v$k" type veth peer name eth0 netns "${CID}n$k" || return 1
    ip link set "${CID}v$k" master "${CID}br" up
    ip -n "${CID}n$k" addr add "$CLUSTER_NET.$k/24" dev eth0
    ip -n "${CID}n$k" link set eth0 up
    ip -n "${CID}n$k" link set lo up
    # The holder: its UTS and mount namespaces are the node's.
    # (nsenter, not `ip netns exec`, which mounts a new /sys and so hides the cgroups slurmd reads)
    setsid nsenter --net="/run/netns/${CID}n$k" unshare --uts --mount --propagation private bash -c '
      hostname "$1" && mount --bind "$2/tmp" /tmp && mount --bind "$3" /etc/hosts || exit 1
      echo $$ > "$2/holder.pid"; exec env VKC_CLUSTER="$4" sleep infinity' vkc-node "node$k" "$nd" "$cl/hosts" "$cl" \
      < /dev/null > "$cl/log/holder.node$k.log" 2>&1 &
    disown $!
  done
  for k in $(seq "$n"); do
    for _ in $(seq 100); do [ -s "$cl/nodes/node$k/holder.pid" ] && break; sleep 0.05; done
    [ -s "$cl/nodes/node$k/holder.pid" ] || { cluster_fail "node$k did not start: $(tail -1 "$cl/log/holder.node$k.log")"; return 1; }
  done
  # munge: one key, one munged per node (socket in the node's /tmp); a new key
  # over the one an earlier cluster in this folder left.
  mungekey --create --force --keyfile="$cl/munge.key" > /dev/null 2>&1 || { cluster_fail "mungekey could not make a key"; return 1; }
  chmod 600 "$cl/munge.key"
  for k in $(seq "$n"); do
    node_exec "$cl" "$k" bash -c 'mkdir -p -m 755 /tmp/munge && exec munged --force --socket=/tmp/munge/sock \
      --key-file="$1" --log-file="$2/log/munged.node$3.log" --pid-file=/tmp/munge/munged.pid \
      --seed-file=/tmp/munge/seed --num-threads=2' vkc "$cl/munge.key" "$cl" "$k" 2> "$cl/log/munged.err" ||
      { cluster_fail "munged did not start on node$k: $(tail -1 "$cl/log/munged.err")"; return 1; }
  done
  cluster_write_conf "$cl" "$n"
  node_exec "$cl" 1 slurmctld -i 2> "$cl/log/slurmctld.err" ||
    { cluster_fail "slurmctld did not start: $(tail -1 "$cl/log/slurmctld.err")"; return 1; }
  for k in $(seq "$n"); do
    node_exec "$cl" "$k" slurmd -N "node$k" 2> "$cl/log/slurmd.node$k.err" ||
      { cluster_fail "slurmd did not start on node$k: $(tail -1 "$cl/log/slurmd.node$k.err")"; return 1; }
  done
  cluster_wait_idle "$cl" "$n" || return 1
}

cluster_write_conf() {
  local cl=$1 n=$2
  cat > "$cl/slurm.conf" <<EOF
ClusterName=vkcluster
SlurmctldHost=node1($CLUSTER_NET.1)
SlurmUser=root
SlurmdUser=root
SlurmctldPort=$CLUSTER_CTLD_PORT
SlurmdPort=$CLUSTER_SLURMD_PORT
AuthType=auth/munge
AuthInfo=socket=/tmp/munge/sock,cred_expire=10
CredType=cred/munge
StateSaveLocation=$cl/state
SlurmdSpoolDir=$cl/nodes/%n/spool
SlurmctldPidFile=$cl/slurmctld.pid
SlurmdPidFile=$cl/nodes/%n/slurmd.pid
SlurmctldLogFile=$cl/log/slurmctld.log
SlurmdLogFile=$cl/log/slurmd.%n.log
SlurmdParameters=config_overrides
$(slurm_conf_test_cluster)
SlurmdTimeout=6
MessageTimeout=5
KillWait=5
MinJobAge=600
InactiveLimit=0
NodeName=node[1-$n] CPUs=2 State=UNKNOWN
PartitionName=test Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
EOF
}

cluster_wait_idle() { # CL N: until N nodes are idle (30 s)
  local cl=$1 n=$2 idle=0
  for _ in $(seq 150); do
    idle=$(node_exec "$cl" 1 sinfo -h -N -o '%N %t' 2> /dev/null | grep -c ' idle$') || idle=0
    [ "$idle" -ge "$n" ] && return 0
    sleep 0.2
  done
  cluster_fail "only $idle of $n nodes came up: $(node_exec "$cl" 1 sinfo -h -N -o '%N %t' 2>&1 | tr '\n' ' ')"
}

# cluster_down CL: every process of every node, the namespaces, the links,
# the cgroups. Idempotent; works from a partial cluster_up.
cluster_down() {
  local cl k p pids
  cl=$(realpath -m "$1")
  cluster_names "$cl"
  local nss
  nss=$(ip netns list 2> /dev/null | awk '{print $1}' | grep "^${CID}n[0-9]*$" || true)
  # Jobs first (quietly), then the daemons by SIGTERM, then whatever is left by SIGKILL.
  if [ -f "$cl/nodes/node1/holder.pid" ] && kill -0 "$(node_pid "$cl" 1)" 2> /dev/null && [ -f "$cl/slurmctld.pid" ]; then
    timeout 5 nsenter -t "$(node_pid "$cl" 1)" -n -u -m env SLURM_CONF="$cl/slurm.conf" scancel --quiet --full \
      --partition=test 2> /dev/null || true
  fi
  for sig in TERM KILL; do
    pids=""
    for k in $nss; do pids+=" $(ip netns pids "$k" 2> /dev/null | tr '\n' ' ')"; done
    # and any process of the cluster outside a named namespace (a namespace deleted early)
    pids+=" $(cluster_pids "$cl" | tr '\n' ' ')"
    # shellcheck disable=SC2086
    [ -n "${pids// /}" ] && kill -s $sig $pids 2> /dev/null
    for _ in $(seq 40); do
      p=""
      for k in $nss; do p+=$(ip netns pids "$k" 2> /dev/null); done
      [ -z "$p" ] && break
      sleep 0.1
    done
  done
  # A namespace lives on, unnamed, while a closed TCP connection in it still
  # retransmits (to a node cut off); its veth pair would live on with it. So
  # the sockets are destroyed (ss -K, where the kernel allows) and the links
  # deleted from the host's end, which removes both ends.
  for k in $nss; do ip netns exec "$k" ss -K -a > /dev/null 2>&1 || true; done
  for p in $(ip -o link show 2> /dev/null | awk -F': ' -v c="$CID" 'index($2, c) == 1 {sub(/@.*/, "", $2); print $2}'); do
    ip link del "$p" 2> /dev/null || true
  done
  for k in $nss; do ip netns del "$k" 2> /dev/null || true; done
  # The kernel frees a namespace (and the veth ends in it) a little later.
  for _ in $(seq 50); do
    ip -o link show 2> /dev/null | grep -q ": ${CID}" || break
    sleep 0.1
  done
  for p in "$CLUSTER_CGROUP_ROOT/$CID"*; do [ -d "$p" ] && rmdir "$p" 2> /dev/null; done
  rm -f "$cl/cluster.env"
  return 0
}

# cluster_pids CL: the processes with VKC_CLUSTER=CL in their environment.
cluster_pids() {
  local f
  for f in /proc/[0-9]*/environ; do
    if { tr '\0' '\n' < "$f" | grep -qxF "VKC_CLUSTER=$1"; } 2> /dev/null; then
      f=${f%/environ}
      echo "${f#/proc/}"
    fi
  done
}

# cluster_leftovers CL: prints what of the cluster is still there (nothing: empty).
cluster_leftovers() {
  local cl
  cl=$(realpath -m "$1")
  cluster_names "$cl"
  ip netns list 2> /dev/null | awk '{print "namespace " $1}' | grep " ${CID}" || true
  ip -o link show 2> /dev/null | awk -F': ' '{print "link " $2}' | grep " ${CID}" || true
  # Every process of the cluster has VKC_CLUSTER=CL in its environment (node_exec
  # and the holders set it; children inherit it). Zombies have no environment:
  # a daemon killed here stays a zombie where PID 1 does not reap (some containers).
  local f
  for f in $(cluster_pids "$cl"); do
    echo "process $f $( { tr '\0' ' ' < "/proc/$f/cmdline"; } 2> /dev/null)"
  done
  ls -d "$CLUSTER_CGROUP_ROOT/$CID"* 2> /dev/null | sed 's/^/cgroup /' || true
}

node_kill() { # CL K: the node is gone: its link cut, then SIGKILL to each of its processes
  local cl=$1 k=$2
  cluster_env "$cl"
  ip link set "${CID}v$k" down
  # shellcheck disable=SC2046
  kill -KILL $(ip netns pids "${CID}n$k") 2> /dev/null || true
}

# node_slow_link CL K RATE [both]: the traffic to node K (and with "both" from it too)
# limited to RATE (tc units, e.g. 2mbit) by a token bucket (tbf) on the veth. The
# burst is small (4 kB), or a step's few kilobytes would pass unshaped.
node_slow_link() {
  local cl=$1 k=$2 rate=$3 dir=${4:-in}
  cluster_env "$cl"
  tc qdisc add dev "${CID}v$k" root tbf rate "$rate" burst 4kb latency 1s || return 1
  if [ "$dir" = both ]; then
    ip netns exec "${CID}n$k" tc qdisc add dev eth0 root tbf rate "$rate" burst 4kb latency 1s || return 1
  fi
}

node_slow_cpu() { # CL K PCT: a cpu cgroup (v1: cfs quota) for all processes of node K
  local cl=$1 k=$2 pct=$3 cg p
  cluster_env "$cl"
  [ -w "$CLUSTER_CGROUP_ROOT/cgroup.procs" ] || { cluster_fail "no writable cgroup v1 cpu controller at $CLUSTER_CGROUP_ROOT"; return 1; }
  cg=$CLUSTER_CGROUP_ROOT/${CID}n$k
  mkdir -p "$cg"
  # A short period (10 ms), so that the throttling falls in every phase of a step, not
  # in a few whole steps.
  echo 10000 > "$cg/cpu.cfs_period_us"
  echo $((pct * 100)) > "$cg/cpu.cfs_quota_us"
  for p in $(ip netns pids "${CID}n$k"); do echo "$p" > "$cg/cgroup.procs" 2> /dev/null || true; done
}

# cluster_mpi_env: the OpenMPI settings for ranks on these nodes (exported;
# sbatch and srun pass the submitter's environment on): TCP between nodes on
# the cluster's subnet only (shared memory within a node), the ob1 messaging
# layer, and yielding while waiting: the nodes share this machine's cores,
# and a rank spinning in MPI_Wait would starve the others.
cluster_mpi_env() {
  export OMPI_MCA_pml=ob1 OMPI_MCA_btl=self,vader,tcp OMPI_MCA_btl_tcp_if_include=$CLUSTER_NET.0/24 \
    OMPI_MCA_oob_tcp_if_include=$CLUSTER_NET.0/24 OMPI_MCA_mpi_yield_when_idle=1 OMP_NUM_THREADS=1 \
    HDF5_USE_FILE_LOCKING=FALSE
}
