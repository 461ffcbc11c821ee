#!/usr/bin/env python3
"""A scaling model of vitkd's data-parallel step, calibrated from timing logs.

    scaling.py predict --calibrate RUN [RUN ...] (--link-gbit G | --link-probe FILE)
                       [--latency-us A] --nodes N [N ...] [--ranks-per-node R]
                       [--global-batch G] [--algorithm openmpi|ring] [--intra-gbyte B]
    scaling.py predict --compute-ms MS --params N --batch B [--wire bf16]
                       [--optimizer-ms MS] [--exposed-fraction E] ...   (a projection:
                       the compute stated, not measured)
    scaling.py check   --calibrate RUN [RUN ...] --runs LINK RUN [RUN ...] [--runs ...]
                       [--latency-us A] [--tolerance 0.15]

RUN is a vitkd run folder (timing.h5 and result.json, read with report.py's
reader). LINK is a nominal rate ("200mbit", "1gbit") or "probe:FILE" (a JSON
with the measured payload rate, {"bytes_per_second": ...}, as
tests/cluster/scaling_runs.sh writes). `check` predicts every measured run
from the calibration, groups the runs by link and node count (the medians of
their repetitions), prints measured against predicted, and exits 1 when a
step time or images/s is off by more than the tolerance (2 on bad input).

The model (all formulas are in the section "the model" below):

  step(p) = compute(p) + e * RS(p) + opt(p) + AR(p) + AG(p) + other

  compute(p)  forward + backward (+ teacher, sifting, data wait) of one rank,
              from the calibration's per-step samples (each run's steps around
              its own median, added to the median of the runs' medians): the
              step waits for the slowest of p ranks, so the median of the max
              of p independent draws, the 0.5^(1/p) quantile of the samples; times
              b / b_cal when the per-rank batch b differs (cost per sample
              taken as constant)
  RS(p)       the gradients' reduce-scatter, padded parameters x wire bytes
              (4 fp32, 2 bf16):
                ring:     (p-1)/p * B/bw + (p-1)*alpha
                openmpi:  ceil(log2 p) * (B/bw + alpha) + (p-1)/p * B/bw + alpha
              ("openmpi": OpenMPI 4.1's MPI_Ireduce_scatter (coll/libnbc) is a
              binomial-tree reduce of the whole buffer to rank 0, then a linear
              scatter from rank 0, not a ring)
  e           the exposed fraction of RS: 1 with one gradient bucket or
              dist.overlap = false (the reduce-scatter starts after
              backward); with k buckets 1/k at best (all but the last hidden);
              measured as comm_wait / RS(p) when a calibration run has p > 1
  AG(p)       the parameters' all-gather, padded parameters x 4 bytes (fp32), or
              x 2 with the bf16 copy (result.json "gather": "bf16"; the fp32
              norms beside it, 0.5 % of ViT-S/16, are left out):
              (p-1)/p * B/bw + steps*alpha (ring: p-1 steps; openmpi: two_proc,
              recursive doubling or Bruck, ceil(log2 p) steps, the same bytes)
  AR(p)       the gradient norm's allreduce (8 bytes): 2*ceil(log2 p)*alpha
  opt(p)      AdamW on the shard: the calibration's optimizer phase x p_cal/p
  other       the step's time outside the phases (loop, timing log), as measured
  bw          the link's payload rate: nominal x 1448/1514 (TCP over an
              Ethernet MTU of 1500, with timestamps) or a probe's measurement;
              the link is full duplex (both directions at bw, as shaped)
  images/s    p * b / step(p)

Assumptions: every rank computes alike (the calibration has the node's CPU
share the predicted nodes have), one rank per node for "openmpi" (several
ranks per node: "ring" with bw the node's inter-node link), no congestion
beyond the per-node link, occasional phases (checkpoint, eval) left out.
"""
import argparse
import json
import math
import os
import re
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from report_read import FormatError, Run  # noqa: E402
from report_stats import kept_steps  # noqa: E402

TCP_PAYLOAD_EFFICIENCY = 1448 / 1514  # MSS (with TCP timestamps) / Ethernet frame at MTU 1500
PAD_MULTIPLE = 16                     # vitkd pads the flat buffer to a multiple of ranks x 16
COMPUTE_PHASES = ("data_wait", "teacher_forward", "sift_forward", "student_forward", "backward")
ALL_STEP_PHASES = COMPUTE_PHASES + ("comm_wait", "optimizer", "all_gather")
WARMUP_STEPS = 3


# ---------------------------------------------------------------------------
# the model: every formula is here

def ceil_log2(p):
    return 0 if p <= 1 else math.ceil(math.log2(p))


def ring_reduce_scatter(p, nbytes, bw, alpha):
    """Ring reduce-scatter (NCCL's): p-1 steps of nbytes/p each."""
    return 0.0 if p <= 1 else (p - 1) / p * nbytes / bw + (p - 1) * alpha


def ring_all_gather(p, nbytes, bw, alpha):
    """Ring all-gather: p-1 steps of nbytes/p each."""
    return ring_reduce_scatter(p, nbytes, bw, alpha)


def ring_allreduce(p, nbytes, bw, alpha):
    """Ring allreduce = reduce-scatter + all-gather."""
    return 2 * ring_reduce_scatter(p, nbytes, bw, alpha)


def binomial_reduce_scatter(p, nbytes, bw, alpha):
    """OpenMPI 4.1 coll/libnbc MPI_Ireduce_scatter: binomial reduce of the whole
    buffer to rank 0 (ceil(log2 p) rounds of nbytes into rank 0's link), then
    rank 0 sends each rank its block ((p-1)/p of the buffer out of its link)."""
    if p <= 1:
        return 0.0
    return ceil_log2(p) * (nbytes / bw + alpha) + (p - 1) / p * nbytes / bw + alpha


def tuned_all_gather(p, nbytes, bw, alpha):
    """OpenMPI 4.1 coll/tuned MPI_Allgather below 32 ranks (two_proc, recursive
    doubling, or Bruck where p is not a power of 2): each rank sends and
    receives (p-1)/p of the buffer, in ceil(log2 p) steps."""
    return 0.0 if p <= 1 else (p - 1) / p * nbytes / bw + ceil_log2(p) * alpha


def norm_allreduce(p, alpha):
    """The gradient norm's allreduce of one double: latency only."""
    return 2 * ceil_log2(p) * alpha


def slowest_of(samples, p):
    """Median of the maximum of p independent draws from `samples`: the
    0.5^(1/p) quantile (p = 1: the median)."""
    return float(np.quantile(np.asarray(samples, dtype=float), 0.5 ** (1.0 / p)))


def padded_params(params, p):
    m = p * PAD_MULTIPLE
    return -(-int(params) // m) * m


def default_exposed_fraction(buckets, overlap):
    """Exposed share of the reduce-scatter from the bucket layout: one bucket (or
    no overlap) starts after backward; k buckets hide at most all but the last."""
    return 1.0 if buckets <= 1 or not overlap else 1.0 / buckets


def link_payload_rate(nominal_bits_per_second, efficiency=TCP_PAYLOAD_EFFICIENCY):
    return nominal_bits_per_second / 8.0 * efficiency


def predict_step(cal, nodes, ranks_per_node, link, algorithm, batch=None, exposed=None):
    """One prediction: a dict of the step's parts (seconds) and images/s.
    cal: Calibration; link: dict(bw=bytes/s, alpha=s, intra_bw=bytes/s)."""
    p = nodes * ranks_per_node
    b = cal.batch if batch is None else batch
    bw = link["bw"] if nodes > 1 else link["intra_bw"]
    alpha = link["alpha"] if nodes > 1 else link.get("intra_alpha", 1e-6)
    pad = padded_params(cal.params, p)
    rs_bytes, ag_bytes = pad * cal.wire_bytes, pad * cal.gather_bytes
    if algorithm == "openmpi":
        if ranks_per_node != 1 and nodes > 1:
            raise ValueError("the openmpi schedule is modelled for one rank per node; use --algorithm ring")
        rs = binomial_reduce_scatter(p, rs_bytes, bw, alpha)
        ag = tuned_all_gather(p, ag_bytes, bw, alpha)
    elif algorithm == "ring":
        rs = ring_reduce_scatter(p, rs_bytes, bw, alpha)
        ag = ring_all_gather(p, ag_bytes, bw, alpha)
    else:
        raise ValueError(f"no algorithm {algorithm!r}")
    e = cal.exposed if exposed is None else exposed
    parts = {
        "compute": slowest_of(cal.compute_samples, p) * b / cal.batch,
        "rs": rs, "rs_exposed": e * rs,
        "optimizer": cal.optimizer * cal.world / p,
        "allreduce": norm_allreduce(p, alpha),
        "all_gather": ag, "other": cal.other,
    }
    step = (parts["compute"] + parts["rs_exposed"] + parts["optimizer"] + parts["allreduce"]
            + parts["all_gather"] + parts["other"])
    parts.update(step=step, images_per_second=p * b / step, ranks=p, batch=b,
                 comm_share=(parts["rs_exposed"] + parts["allreduce"] + parts["all_gather"]) / step)
    return parts


# ---------------------------------------------------------------------------
# reading runs

def parse_rate(text):
    """'200mbit', '1gbit', '1.5' (Gbit/s) -> bits/s."""
    m = re.fullmatch(r"([0-9.]+(?:e[0-9+-]+)?)\s*([kmg]?)(bit)?", text.strip().lower())
    if not m:
        raise ValueError(f"a link rate like 200mbit or 1gbit, not {text!r}")
    unit = {"": 1e9 if not m[3] else 1, "k": 1e3, "m": 1e6, "g": 1e9}[m[2]]
    return float(m[1]) * unit


def link_from(spec, latency, efficiency):
    """LINK ('200mbit' or 'probe:FILE') -> link dict."""
    if spec.startswith("probe:"):
        with open(spec[6:]) as fh:
            bw = float(json.load(fh)["bytes_per_second"])
        label = f"probe {bw / 1e6:.1f} MB/s"
    else:
        bw = link_payload_rate(parse_rate(spec), efficiency)
        label = spec
    return {"bw": bw, "alpha": latency, "intra_bw": 10e9, "intra_alpha": 1e-6, "label": label}


def run_config(run):
    import tomllib
    try:
        return tomllib.loads((run.result or {}).get("config", ""))
    except (tomllib.TOMLDecodeError, TypeError):
        return {}


def run_batch(run):
    b = run_config(run).get("data", {}).get("batch_size")
    if b is None:
        raise FormatError(f"{run.dir}: result.json names no data.batch_size")
    return int(b)


def run_shape(run):
    """(nodes, ranks per node) from the timing log's hostnames."""
    hosts = [h for h in run.hosts]
    n = len(set(hosts)) if "?" not in hosts else 1
    return n, run.world_size // max(1, n)


def phase(run, name, idx):
    i = run.phase_index(name)
    return run.step_seconds[idx, :, i] if i is not None else np.zeros((len(idx), run.ranks))


def measured_step(run, skip=WARMUP_STEPS):
    """Median over the kept steps of the slowest rank's step wall time."""
    idx = kept_steps(run, skip)
    return float(np.median(run.wall[idx].max(axis=1)))


class Calibration:
    """What the model takes from calibration runs (all at one world size)."""

    def __init__(self, runs, skip=WARMUP_STEPS):
        worlds = {r.world_size for r in runs}
        if len(worlds) != 1:
            raise FormatError("calibration runs of different world sizes: " + ", ".join(map(str, sorted(worlds))))
        self.world = worlds.pop()
        self.params = int(runs[0].parameters)
        self.batch = run_batch(runs[0])
        cfg = run_config(runs[0])
        res = runs[0].result or {}
        self.wire_bytes = 2 if res.get("reduce", cfg.get("precision", {}).get("reduce")) == "bf16" else 4
        self.gather_bytes = 2 if res.get("gather") == "bf16" else 4  # absent in older results: fp32
        dist = cfg.get("dist", {})
        bucket_bytes = float(dist.get("bucket_mb", 25.0)) * (1 << 20)
        self.buckets = max(1, math.ceil(padded_params(self.params, self.world) * 4 / bucket_bytes))
        self.overlap = bool(dist.get("overlap", True))
        comp, medians, opt, other, comm = [], [], [], [], []
        for r in runs:
            idx = kept_steps(r, skip)
            c = sum(phase(r, n, idx) for n in COMPUTE_PHASES).ravel()   # steps x ranks
            medians.append(float(np.median(c)))
            comp.append(c - medians[-1])
            opt.append(float(np.median(phase(r, "optimizer", idx))))
            inside = sum(phase(r, n, idx) for n in ALL_STEP_PHASES)
            other.append(float(np.median(r.wall[idx] - inside)))
            comm.append(float(np.median(phase(r, "comm_wait", idx))))
        # Step-to-step jitter within a run (what differs between ranks of one run),
        # around the median of the runs' medians (a slower hour of a shared machine
        # moves a whole run, not one rank of it).
        self.compute_samples = (float(np.median(medians)) + np.concatenate(comp)).tolist()
        self.optimizer = float(np.median(opt))
        self.other = max(0.0, float(np.median(other)))
        self.comm_wait = float(np.median(comm))
        self.exposed = default_exposed_fraction(self.buckets, self.overlap)
        self.exposed_from = f"bucket layout ({self.buckets} bucket(s), overlap {'on' if self.overlap else 'off'})"

    def measure_exposed(self, link, algorithm, nodes, rpn):
        """With p > 1 in the calibration: e = comm_wait / RS(p), in [0, 1]."""
        if self.world <= 1:
            return
        full = predict_step(self, nodes, rpn, link, algorithm, exposed=1.0)["rs"]
        if full > 0:
            self.exposed = min(1.0, max(0.0, self.comm_wait / full))
            self.exposed_from = f"measured: comm_wait {self.comm_wait * 1e3:.1f} ms of RS {full * 1e3:.1f} ms"

    def describe(self):
        return (f"calibration: {self.world} rank(s), {self.params} parameters, per-rank batch {self.batch}, "
                f"{len(self.compute_samples)} step samples, compute median {np.median(self.compute_samples) * 1e3:.1f} ms, "
                f"optimizer {self.optimizer * 1e3:.2f} ms, other {self.other * 1e3:.2f} ms, wire "
                f"{'bf16' if self.wire_bytes == 2 else 'fp32'}, exposed RS fraction {self.exposed:.2f} "
                f"({self.exposed_from})")


class AssumedCalibration(Calibration):
    """A calibration stated instead of measured (a projection): one rank's
    compute per step, the optimizer at one rank, the parameters and wire."""

    def __init__(self, compute_s, params, batch, wire_bytes=4, optimizer_s=0.0, exposed=1.0, gather_bytes=4):
        self.world, self.params, self.batch, self.wire_bytes = 1, int(params), int(batch), wire_bytes
        self.gather_bytes = gather_bytes
        self.compute_samples, self.optimizer, self.other, self.comm_wait = [compute_s], optimizer_s, 0.0, 0.0
        self.buckets, self.overlap, self.exposed = 0, True, exposed
        self.exposed_from = "assumed"

    def describe(self):
        return (f"assumed: compute {self.compute_samples[0] * 1e3:.1f} ms per step at batch {self.batch} per rank, "
                f"{self.params} parameters, wire {'bf16' if self.wire_bytes == 2 else 'fp32'}, optimizer "
                f"{self.optimizer * 1e3:.2f} ms at 1 rank, exposed RS fraction {self.exposed:.2f}")


def load_runs(dirs):
    return [Run(d) for d in dirs]


# ---------------------------------------------------------------------------
# commands

def ms(x):
    return f"{x * 1e3:.1f}"


def table(header, rows):
    w = [max(len(str(x)) for x in col) for col in zip(header, *rows)]
    line = lambda r: "  ".join(str(x).rjust(n) for x, n in zip(r, w))  # noqa: E731
    return [line(header), line(["-" * n for n in w])] + [line(r) for r in rows]


def cmd_predict(a):
    link = (link_from("probe:" + a.link_probe, a.latency_us * 1e-6, a.payload_efficiency) if a.link_probe
            else link_from(a.link_gbit + "gbit", a.latency_us * 1e-6, a.payload_efficiency))
    link["intra_bw"] = a.intra_gbyte * 1e9
    if a.calibrate:
        cal = Calibration(load_runs(a.calibrate))
        cal.measure_exposed(link, a.algorithm, *run_shape(load_runs(a.calibrate[:1])[0]))
    elif a.compute_ms is not None and a.params and a.batch:
        cal = AssumedCalibration(a.compute_ms * 1e-3, a.params, a.batch, 2 if a.wire == "bf16" else 4,
                                 a.optimizer_ms * 1e-3, gather_bytes=2 if a.gather == "bf16" else 4)
    else:
        raise ValueError("give --calibrate RUN..., or --compute-ms, --params and --batch")
    if a.exposed_fraction is not None:
        cal.exposed, cal.exposed_from = a.exposed_fraction, "given"
    print(cal.describe())
    print(f"link: payload {link['bw'] / 1e6:.2f} MB/s, latency {link['alpha'] * 1e6:.0f} us; algorithm {a.algorithm}")
    rows = []
    for n in a.nodes:
        p = n * a.ranks_per_node
        b = None
        if a.global_batch:
            if a.global_batch % p:
                raise ValueError(f"global batch {a.global_batch} is not divisible by {p} ranks")
            b = a.global_batch // p
        r = predict_step(cal, n, a.ranks_per_node, link, a.algorithm, batch=b)
        rows.append([n, a.ranks_per_node, r["batch"], ms(r["compute"]), ms(r["rs"]), ms(r["rs_exposed"]),
                     ms(r["optimizer"]), ms(r["all_gather"]), ms(r["step"]), f"{r['images_per_second']:.1f}",
                     f"{100 * r['comm_share']:.0f}%"])
    print("\n".join(table(["nodes", "ranks/node", "batch/rank", "compute ms", "RS ms", "RS exposed ms",
                           "opt ms", "AG ms", "step ms", "images/s", "comm share"], rows)))
    return 0


def cmd_check(a):
    cal = Calibration(load_runs(a.calibrate))
    groups = {}
    order = []
    for spec, *dirs in a.runs:
        link = link_from(spec, a.latency_us * 1e-6, a.payload_efficiency)
        for run in load_runs(dirs):
            key = (spec, run_shape(run))
            if key not in groups:
                groups[key] = (link, [])
                order.append(key)
            groups[key][1].append(run)
    if cal.world > 1:
        spec, shape = order[0]
        cal.measure_exposed(groups[order[0]][0], a.algorithm, *shape)
    print(cal.describe())
    rows, worst = [], 0.0
    for key in order:
        spec, (n, rpn) = key
        link, runs = groups[key]
        steps = [measured_step(r) for r in runs]
        batches = {run_batch(r) for r in runs}
        if len(batches) != 1:
            raise FormatError(f"runs at {spec}, {n} node(s) differ in data.batch_size: {sorted(batches)}")
        b = batches.pop()
        t = float(np.median(steps))
        ips = n * rpn * b / t
        comm = float(np.median([np.median(phase(r, "comm_wait", kept_steps(r, WARMUP_STEPS)).max(axis=1))
                                for r in runs]))
        ag = float(np.median([np.median(phase(r, "all_gather", kept_steps(r, WARMUP_STEPS)).max(axis=1))
                              for r in runs]))
        pr = predict_step(cal, n, rpn, link, a.algorithm, batch=b)
        e_t = pr["step"] / t - 1
        e_i = pr["images_per_second"] / ips - 1
        worst = max(worst, abs(e_t), abs(e_i))
        rows.append([link["label"], n, rpn, len(runs), ms(t), ms(pr["step"]), f"{100 * e_t:+.1f}%",
                     f"{ips:.1f}", f"{pr['images_per_second']:.1f}", f"{100 * e_i:+.1f}%",
                     ms(comm), ms(pr["rs_exposed"]), ms(ag), ms(pr["all_gather"])])
    print("\n".join(table(["link", "nodes", "ranks/node", "runs", "step ms", "pred ms", "error",
                           "images/s", "pred images/s", "error", "comm_wait ms", "pred RS ms",
                           "all_gather ms", "pred AG ms"], rows)))
    print("(measured: the median over runs of each run's median step, slowest rank, after "
          f"{WARMUP_STEPS} warm-up steps; comm_wait and all_gather: the slowest rank's medians)")
    if worst > a.tolerance:
        print(f"FAIL: a prediction is off by {100 * worst:.1f}% (tolerance {100 * a.tolerance:.0f}%)")
        return 1
    print(f"ok: every prediction within {100 * a.tolerance:.0f}% (worst {100 * worst:.1f}%)")
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    for name in ("predict", "check"):
        s = sub.add_parser(name)
        s.add_argument("--calibrate", nargs="+", required=name == "check", metavar="RUN")
        s.add_argument("--latency-us", type=float, default=50.0)
        s.add_argument("--payload-efficiency", type=float, default=TCP_PAYLOAD_EFFICIENCY,
                       help="payload / nominal rate of a --link-gbit or LINK rate (default 1448/1514)")
        s.add_argument("--algorithm", choices=("openmpi", "ring"), default="openmpi")
    p = sub.choices["predict"]
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--link-gbit", help="the link's nominal rate, Gbit/s")
    g.add_argument("--link-probe", metavar="FILE", help='JSON {"bytes_per_second": ...}: a measured payload rate')
    p.add_argument("--nodes", type=int, nargs="+", required=True)
    p.add_argument("--ranks-per-node", type=int, default=1)
    p.add_argument("--global-batch", type=int, help="fixed global batch (default: the calibration's per-rank batch)")
    p.add_argument("--intra-gbyte", type=float, default=10.0, help="bandwidth within a node, GB/s (default 10)")
    p.add_argument("--exposed-fraction", type=float, help="exposed share of the reduce-scatter (default: as calibrated)")
    p.add_argument("--compute-ms", type=float, help="instead of --calibrate: one rank's compute per step")
    p.add_argument("--params", type=int, help="with --compute-ms: parameters")
    p.add_argument("--batch", type=int, help="with --compute-ms: per-rank batch of that compute")
    p.add_argument("--wire", choices=("fp32", "bf16"), default="fp32", help="with --compute-ms: gradient wire type")
    p.add_argument("--gather", choices=("fp32", "bf16"), default="fp32",
                   help="with --compute-ms: the parameters' all-gather type (bf16: precision.gather in a bf16 run)")
    p.add_argument("--optimizer-ms", type=float, default=0.0, help="with --compute-ms: AdamW at one rank")
    c = sub.choices["check"]
    c.add_argument("--runs", nargs="+", action="append", required=True, metavar=("LINK", "RUN"))
    c.add_argument("--tolerance", type=float, default=0.15)
    a = ap.parse_args(argv)
    try:
        return cmd_predict(a) if a.cmd == "predict" else cmd_check(a)
    except (FormatError, ValueError, OSError, KeyError) as e:
        print(f"scaling.py: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
