#!/usr/bin/env bash
# The runs that analysis/scaling.py is checked against: one small ViT trained on
# 1, 2, ... nodes of a simulated cluster (tests/cluster/lib.sh), 1 rank per node,
# under each link setting, REPS times (the rounds interleaved, so that a busy
# moment of this shared machine falls on every configuration alike).
#
#   scaling_runs.sh WORK [RATES [NODES [REPS [STEPS]]]]
#     RATES  link settings, e.g. "off 200mbit" (default): "off" leaves the links
#            as they are; a tc rate shapes every node's link both ways with tbf
#     NODES  node counts, e.g. "1 2 3" (default; the cluster has the largest)
#     REPS   rounds (default 3)     STEPS  training steps per run (default 30)
#   Environment: VITKD (the binary), PYTHON (with h5py), SCALING_CPU_PCT
#   (default 30: every node's processes get that % of one CPU, see below),
#   SCALING_TCP (default "reno": see below; "system" leaves the nodes' TCP
#   settings as the machine's), SCALING_MODEL (model keys, default dim 64,
#   depth 4, 32x32x3, batch 32).
#
# Writes WORK/runs/RATE/nN/repR (a vitkd run folder each), and
# WORK/runs/RATE/probe.json (the link's throughput measured with a
# 4 MB TCP transfer from node1 to node2, Python sockets). The cluster is
# stopped on exit, also when interrupted.
#
# Why a CPU quota on every node: the simulated nodes share this machine's
# cores (2 here), so without one, 3 nodes of one rank each would compute
# slower than 1 node does, which no scaling model of real nodes should
# predict. With 30 % of one CPU per node (cgroup v1 cfs quota, 5 ms
# period), 3 nodes take 0.9 cores: each node computes alike at 1, 2 and 3
# nodes, as long as the machine has that much CPU free; each node's cgroup
# has 8 times a task's CPU weight, so that a build beside it does not take
# the node's quota (it takes what the quota leaves: 1.1 of 2 cores).
#
# Why Reno without slow start after idle on the nodes (per-namespace sysctls,
# SCALING_TCP=reno): this machine's default is BBR, whose window is about
# twice the bandwidth-delay product. The veths' RTT is about 30 us, so BBR
# keeps a few packets in flight, and when both directions of a shaped link
# carry data (an all-gather), the ACKs wait behind the other direction's
# packets in the tbf queue and each direction gets well below the rate
# (2026-12-06, 50 % CPU per node: all-gather 1.25x (2 nodes) and 1.6x (3
# nodes) slower than the rate gives, while a one-way transfer gets the rate).
# A loss-based window (Reno: a namespace may choose only what
# net.ipv4.tcp_allowed_congestion_control allows, here reno and bbr) grows
# until the path is full, and without the restart after idle it stays so from
# one step to the next, as an MPI cluster's TCP is usually set up.
set -euo pipefail
SRC=$(cd "$(dirname "$0")/../.." && pwd)
source "$SRC/tests/cluster/lib.sh"
[ $# -ge 1 ] || { echo "usage: $0 WORK [RATES [NODES [REPS [STEPS]]]]" >&2; exit 2; }
: "${VITKD:?set VITKD to the vitkd binary}" "${PYTHON:=/usr/bin/python3}"
WORK=$(realpath -m "$1")
RATES=${2:-"off 200mbit"}
COUNTS=${3:-"1 2 3"}
REPS=${4:-3}
STEPS=${5:-30}
PCT=${SCALING_CPU_PCT:-30}
TCP=${SCALING_TCP:-reno}
MODEL=${SCALING_MODEL:-"model.image_size=32 model.channels=3 model.patch=4 model.dim=64 model.depth=4 model.heads=4 model.mlp_ratio=4.0 model.classes=10 data.batch_size=32"}
case $WORK/ in /tmp/*) echo "WORK $WORK is under /tmp (each node has its own)" >&2; exit 2 ;; esac
why=$(cluster_can) || { echo "scaling_runs: cannot make a cluster here: $why" >&2; exit 77; }
max=0
for n in $COUNTS; do [ "$n" -gt "$max" ] && max=$n; done
CL=$WORK/cl
S=$WORK  # seen by every node, as CL/shared is
[ -f "$CL/cluster.env" ] && { echo "scaling_runs: $CL holds a running cluster; stop it first" >&2; exit 2; }
rm -rf "$CL"
mkdir -p "$S"
trap 'cluster_down "$CL"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
cluster_up "$CL" "$max" || { echo "scaling_runs: the cluster did not come up (logs in $CL/log)" >&2; exit 1; }
cluster_env "$CL"
cd "$S"
"$VITKD" prepare synthetic --out syn.h5 --train 2048 --test 64 --size 32 --channels 3 --classes 10 --seed 3 > /dev/null
cluster_mpi_env

# Every node's processes (slurmd, so its tasks too) in a cpu cgroup of PCT % of one CPU.
for k in $(seq "$max"); do
  cg=$CLUSTER_CGROUP_ROOT/${CID}n$k
  mkdir -p "$cg"
  echo 5000 > "$cg/cpu.cfs_period_us"
  echo $((PCT * 50)) > "$cg/cpu.cfs_quota_us"  # at least 1 ms: PCT >= 20
  echo 8192 > "$cg/cpu.shares"  # so that the node gets its quota beside other work (8 x a task's weight)
  for p in $(ip netns pids "${CID}n$k"); do echo "$p" > "$cg/cgroup.procs" 2> /dev/null || true; done
done

if [ "$TCP" = reno ]; then
  for k in $(seq "$max"); do
    ip netns exec "${CID}n$k" sysctl -q -w net.ipv4.tcp_congestion_control=reno net.ipv4.tcp_slow_start_after_idle=0
  done
fi

# link_rate RATE: every node's link shaped both ways (tbf), or unshaped ("off").
# The burst: 1 ms of the rate (at least 4 kB), so that the timer's granularity
# does not cut the rate; a 0.8 MB exchange is 200 times larger.
link_rate() {
  local k burst
  for k in $(seq "$max"); do
    tc qdisc del dev "${CID}v$k" root 2> /dev/null || true
    ip netns exec "${CID}n$k" tc qdisc del dev eth0 root 2> /dev/null || true
    [ "$1" = off ] && continue
    burst=$("$PYTHON" -c 'import re,sys; m=re.fullmatch(r"([0-9.]+)([kmg]?)bit", sys.argv[1]); \
      b=float(m[1])*{"":1,"k":1e3,"m":1e6,"g":1e9}[m[2]]/8e3; print(max(4096, int(b)))' "$1")
    tc qdisc add dev "${CID}v$k" root tbf rate "$1" burst "$burst" latency 1s
    ip netns exec "${CID}n$k" tc qdisc add dev eth0 root tbf rate "$1" burst "$burst" latency 1s
  done
}

# probe OUT: 4 MB over TCP from node1 to node2 (in their cgroups), after a 256 kB warm-up
# that the receiver acknowledges (so that none of it is still queued when the clock starts);
# writes {"bytes_per_second": ..., "rtt_seconds": ...} (rtt: median of 50 1-byte ping-pongs).
PROBE='
import json, socket, sys, time
role, host, out = sys.argv[1], sys.argv[2], sys.argv[3]
N = 4 << 20
if role == "server":
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((host, 6999)); s.listen(1); c, _ = s.accept()
    c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    for _ in range(50):
        c.sendall(c.recv(1))
    for n in (256 << 10, N):  # the warm-up, acknowledged; then the timed bytes
        got = 0
        while got < n:
            b = c.recv(1 << 20)
            if not b: break
            got += len(b)
        c.sendall(b"k")
    c.close()
else:
    for _ in range(100):
        try:
            c = socket.create_connection((host, 6999)); break
        except OSError:
            time.sleep(0.05)
    c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    rtt = []
    for _ in range(50):
        t = time.perf_counter(); c.sendall(b"x"); c.recv(1); rtt.append(time.perf_counter() - t)
    c.sendall(bytes(256 << 10)); c.recv(1)
    t = time.perf_counter(); c.sendall(bytes(N)); c.recv(1); dt = time.perf_counter() - t
    rtt.sort()
    json.dump({"bytes_per_second": N / dt, "rtt_seconds": rtt[len(rtt) // 2], "bytes": N}, open(out, "w"))
'
in_cgroup() { # K CMD...: CMD on node K inside its cpu cgroup
  local k=$1
  shift
  # shellcheck disable=SC2016 # $$ and "$@" are the inner shell's
  node_exec "$CL" "$k" bash -c 'echo $$ > "$1/cgroup.procs"; shift; exec "$@"' x \
    "$CLUSTER_CGROUP_ROOT/${CID}n$k" "$@"
}
probe() {
  [ "$max" -ge 2 ] || return 0
  in_cgroup 2 "$PYTHON" -c "$PROBE" server "$CLUSTER_NET.2" "$1" &
  local srv=$!
  in_cgroup 1 "$PYTHON" -c "$PROBE" client "$CLUSTER_NET.2" "$1"
  wait "$srv"
  echo "probe $(cat "$1")"
}

source "$SRC/tests/lib/common.sh"
# shellcheck disable=SC2086
tiny_config cfg.toml "data.path=\"$S/syn.h5\"" $MODEL train.threads=1 train.timing_every_steps=1 \
  train.max_steps="$STEPS" train.epochs=1 train.log_every_steps=10 train.final_eval=false \
  train.eval_every_epochs=0 checkpoint.every_steps=0
for rate in $RATES; do
  mkdir -p "runs/$rate"
  link_rate "$rate"
  probe "$S/runs/$rate/probe.json"
done
for rep in $(seq "$REPS"); do
  for rate in $RATES; do
    link_rate "$rate"
    for n in $COUNTS; do
      out=$S/runs/$rate/n$n/rep$rep
      mkdir -p "$S/runs/$rate/n$n"
      t0=$(date +%s.%N)
      node_exec "$CL" 1 timeout 300 srun -N"$n" -n"$n" --mpi=pmix "$VITKD" train cfg.toml \
        --set run.out_dir="$out" > "$out.log" 2>&1 || { tail -5 "$out.log"; echo "scaling_runs: $out failed" >&2; exit 1; }
      printf 'rep %s rate %s nodes %s: %.1f s, %s\n' "$rep" "$rate" "$n" "$(echo "$(date +%s.%N) - $t0" | bc)" \
        "$(grep -o '[0-9.]* img/s' "$out.log" | tail -1)"
    done
  done
done
link_rate off
