#!/usr/bin/env python3
"""Test of analysis/scaling.py: its formulas against hand-computed cases, and
its commands on timing logs written here with h5py.

    python3 tests/analysis/test_scaling.py SRC_DIR WORK_DIR

Every expected value below is worked out by hand (the arithmetic is written
out, not taken from the model), so a changed formula fails a check:
  ring       reduce-scatter / all-gather (p-1)/p*B/bw + (p-1)*alpha at p = 1, 2, 4;
             allreduce twice that
  openmpi    binomial reduce + linear scatter: ceil(log2 p)*(B/bw + alpha)
             + (p-1)/p*B/bw + alpha at p = 1, 2, 3, 4; all-gather
             (p-1)/p*B/bw + ceil(log2 p)*alpha
  overlap    exposed fraction 1 with one bucket or no overlap, 1/k with k
             buckets, comm_wait / RS when a calibration run has 2 ranks
  slowest    the slowest of p ranks: the 0.5^(1/p) quantile of the samples, each run's
             steps taken around its own median (two runs of constant 50 and 70 ms: 60)
  cal1/      a 1-rank run (20 steps: forward 20 ms, backward 40 ms,
             optimizer 2 ms, 1 ms outside the phases; 1000 parameters, batch 8)
             predicted at 2 nodes over 100 Mbit/s and 50 us: step and images/s
  meas*/     2-rank "measured" runs: `check` passes at +5 %, fails (exit 1) at +30 %
  bf16/      the same calibration with precision.reduce = "bf16": half the RS bytes
Exits 1 if any check fails.
"""
import importlib.util
import json
import os
import shutil
import subprocess
import sys

try:
    import h5py
    import numpy as np
except ImportError as e:
    print(f"SKIP: {sys.executable} lacks {e.name} (Debian: python3-<module>; Spack: py-<module>)")
    sys.exit(77)

SRC, WORK = sys.argv[1], sys.argv[2]
sys.path.insert(0, os.path.join(SRC, "tests", "analysis"))
from checks import check, finish  # noqa: E402

spec = importlib.util.spec_from_file_location("scaling", os.path.join(SRC, "analysis", "scaling.py"))
S = importlib.util.module_from_spec(spec)
spec.loader.exec_module(S)

PHASES = ["data_wait", "teacher_forward", "sift_forward", "student_forward", "backward",
          "comm_wait", "optimizer", "all_gather", "checkpoint", "eval"]


def close(a, b, rel=1e-9):
    return abs(a - b) <= rel * max(abs(a), abs(b), 1e-12)


# ---- the formulas, by hand: B = 1e6 bytes, bw = 1e6 bytes/s, alpha = 1 ms ----
B, BW, A = 1e6, 1e6, 1e-3
check(S.ring_reduce_scatter(1, B, BW, A) == 0.0, "ring reduce-scatter at p = 1 is 0")
check(close(S.ring_reduce_scatter(2, B, BW, A), 0.5 + 0.001), "ring reduce-scatter at p = 2: 1/2 B/bw + 1 alpha = 0.501 s")
check(close(S.ring_reduce_scatter(4, B, BW, A), 0.75 + 0.003), "ring reduce-scatter at p = 4: 3/4 B/bw + 3 alpha = 0.753 s")
check(close(S.ring_all_gather(4, B, BW, A), 0.753), "ring all-gather at p = 4 = 0.753 s")
check(close(S.ring_allreduce(2, B, BW, A), 1.002) and close(S.ring_allreduce(4, B, BW, A), 1.506),
      "ring allreduce = 2 x reduce-scatter: 1.002 s at p = 2, 1.506 s at p = 4")
check(S.binomial_reduce_scatter(1, B, BW, A) == 0.0, "openmpi reduce-scatter at p = 1 is 0")
check(close(S.binomial_reduce_scatter(2, B, BW, A), 1.001 + 0.5 + 0.001),
      "openmpi reduce-scatter at p = 2: 1 round of B + 1/2 B scattered = 1.502 s")
check(close(S.binomial_reduce_scatter(3, B, BW, A), 2 * 1.001 + 2 / 3 + 0.001),
      "openmpi reduce-scatter at p = 3: 2 rounds of B + 2/3 B scattered = 2.6697 s")
check(close(S.binomial_reduce_scatter(4, B, BW, A), 2 * 1.001 + 0.75 + 0.001),
      "openmpi reduce-scatter at p = 4: 2 rounds of B + 3/4 B scattered = 2.753 s")
check(S.tuned_all_gather(1, B, BW, A) == 0.0 and close(S.tuned_all_gather(3, B, BW, A), 2 / 3 + 0.002)
      and close(S.tuned_all_gather(4, B, BW, A), 0.75 + 0.002),
      "openmpi all-gather: 0 at p = 1, 2/3 B/bw + 2 alpha at p = 3, 3/4 B/bw + 2 alpha at p = 4")
check(S.norm_allreduce(1, A) == 0.0 and close(S.norm_allreduce(4, A), 0.004), "norm allreduce: 2 log2(p) alpha")
check(S.default_exposed_fraction(1, True) == 1.0 and S.default_exposed_fraction(4, False) == 1.0
      and S.default_exposed_fraction(4, True) == 0.25,
      "exposed reduce-scatter: 1 with one bucket or overlap off, 1/4 with 4 buckets")
x = list(range(1, 102))  # 1..101
check(close(S.slowest_of(x, 1), 51.0) and close(S.slowest_of(x, 2), 1 + 100 * 0.5 ** 0.5),
      "slowest of p: the median at p = 1, the 0.7071 quantile at p = 2")
check(S.padded_params(1000, 2) == 1024 and S.padded_params(208074, 3) == 208080, "padding to ranks x 16")
check(close(S.link_payload_rate(100e6), 12.5e6 * 1448 / 1514), "payload rate: nominal / 8 x 1448/1514")


# ---- timing logs ----
def write_run(d, *, ranks, fwd, bwd, opt, outside, comm=0.0, ag=0.0, steps=20, params=1000, batch=8,
              reduce="fp32", bucket_mb=25.0, overlap=True, hosts=None):
    if os.path.isdir(d):
        shutil.rmtree(d)
    os.makedirs(d)
    st = np.zeros((steps, ranks, len(PHASES)))
    st[:, :, PHASES.index("student_forward")] = fwd
    st[:, :, PHASES.index("backward")] = bwd
    st[:, :, PHASES.index("optimizer")] = opt
    st[:, :, PHASES.index("comm_wait")] = comm
    st[:, :, PHASES.index("all_gather")] = ag
    with h5py.File(os.path.join(d, "timing.h5"), "w") as f:
        f.attrs["format"] = "vitkd-timing"
        f.attrs["format_version"] = 1
        f.attrs["world_size"] = ranks
        f.attrs["parameters"] = params
        f.attrs["hostnames"] = np.array(hosts or [f"node{r + 1}" for r in range(ranks)], dtype=h5py.string_dtype())
        ds = f.create_dataset("step_seconds", data=st)
        ds.attrs["phases"] = np.array(PHASES, dtype=h5py.string_dtype())
        f.create_dataset("step_wall_seconds", data=st.sum(axis=2) + outside)
    cfg = (f"[data]\nbatch_size = {batch}\n[dist]\nbucket_mb = {bucket_mb}\n"
           f"overlap = {'true' if overlap else 'false'}\n[precision]\nreduce = \"{reduce}\"\n")
    with open(os.path.join(d, "result.json"), "w") as fh:
        json.dump({"config": cfg, "reduce": reduce, "world_size": ranks, "parameters": params}, fh)
    return d


def run(*args):
    p = subprocess.run([sys.executable, os.path.join(SRC, "analysis", "scaling.py"), *args],
                       capture_output=True, text=True)
    return p.returncode, p.stdout + p.stderr


os.makedirs(WORK, exist_ok=True)
cal = write_run(os.path.join(WORK, "cal1"), ranks=1, fwd=0.020, bwd=0.040, opt=0.002, outside=0.001)
C = S.Calibration([S.Run(cal)])
check(C.world == 1 and C.params == 1000 and C.batch == 8 and C.exposed == 1.0 and close(C.other, 0.001)
      and close(C.optimizer, 0.002), "calibration read: 1 rank, 1000 parameters, batch 8, one bucket, other 1 ms")
# By hand at 2 nodes x 1 rank, 100 Mbit/s, 50 us: padded 1024 parameters, 4096 bytes both ways;
# bw = 12.5e6 * 1448/1514 = 11955085.865 bytes/s.
bw = 12.5e6 * 1448 / 1514
alpha = 50e-6
rs = 1 * (4096 / bw + alpha) + 0.5 * 4096 / bw + alpha
ag = 0.5 * 4096 / bw + 1 * alpha
step = 0.060 + rs + 0.002 / 2 + 2 * alpha + ag + 0.001
link = S.link_from("100mbit", alpha, S.TCP_PAYLOAD_EFFICIENCY)
pr = S.predict_step(C, 2, 1, link, "openmpi")
check(close(pr["step"], step) and close(pr["images_per_second"], 16 / step),
      f"2 nodes, openmpi: step {step * 1e3:.4f} ms (60 + RS {rs * 1e3:.4f} + 1 + 0.1 + AG {ag * 1e3:.4f} + 1), "
      f"images/s {16 / step:.2f} (got {pr['step'] * 1e3:.4f} ms)")
pr4 = S.predict_step(C, 4, 1, link, "ring", batch=4)
rs4 = 0.75 * 4096 / bw + 3 * alpha  # padded to 64: 1024 parameters still
step4 = 0.060 * 4 / 8 + rs4 + 0.002 / 4 + 4 * alpha + rs4 + 0.001
check(close(pr4["step"], step4) and close(pr4["images_per_second"], 16 / step4),
      f"4 nodes, ring, global batch 16 (4 per rank): compute halved, step {step4 * 1e3:.4f} ms")
c2 = S.Calibration([S.Run(write_run(os.path.join(WORK, "bf16"), ranks=1, fwd=0.020, bwd=0.040, opt=0.002,
                                    outside=0.001, reduce="bf16"))])
check(close(S.predict_step(c2, 2, 1, link, "openmpi")["rs"], 1 * (2048 / bw + alpha) + 0.5 * 2048 / bw + alpha),
      "bf16 wire: the reduce-scatter moves 2 bytes per parameter")
c3 = S.Calibration([S.Run(write_run(os.path.join(WORK, "buckets"), ranks=1, fwd=0.020, bwd=0.040, opt=0.002,
                                    outside=0.001, bucket_mb=1008 / (1 << 20)))])
check(c3.buckets == 4 and close(c3.exposed, 0.25), "4 buckets of 1008 bytes (1008 padded parameters x 4): a quarter of the reduce-scatter exposed")
# Overlap as measured: a 2-rank calibration whose comm_wait is half the predicted reduce-scatter.
c4 = S.Calibration([S.Run(write_run(os.path.join(WORK, "cal2"), ranks=2, fwd=0.020, bwd=0.040, opt=0.001,
                                    outside=0.001, comm=rs / 2, ag=ag))])
c4.measure_exposed(link, "openmpi", 2, 1)
check(close(c4.exposed, 0.5), f"measured overlap: comm_wait = RS/2 gives an exposed fraction 0.5 (got {c4.exposed:.4f})")
# slowest-of: a calibration whose compute alternates 50 and 70 ms: one rank's median 60, two ranks' 70.
st_alt = os.path.join(WORK, "alt")
write_run(st_alt, ranks=1, fwd=0.020, bwd=0.040, opt=0.002, outside=0.001, steps=23)
with h5py.File(os.path.join(st_alt, "timing.h5"), "r+") as f:
    s = f["step_seconds"][()]
    s[3::2, 0, PHASES.index("backward")] = 0.030
    s[4::2, 0, PHASES.index("backward")] = 0.050
    f["step_seconds"][...] = s
ca = S.Calibration([S.Run(st_alt)])
check(close(S.predict_step(ca, 1, 1, link, "openmpi")["compute"], 0.060)
      and close(S.predict_step(ca, 2, 1, link, "openmpi")["compute"], 0.070),
      "jitter: compute 50/70 ms alternating: 60 ms at 1 rank (median), 70 ms at 2 (the slower is 70)")

# Jitter is within a run: two runs of constant compute, 50 and 70 ms (a machine busier
# during one), give 60 ms at any p, not the slower run's 70.
ra = write_run(os.path.join(WORK, "run50"), ranks=1, fwd=0.020, bwd=0.030, opt=0.002, outside=0.001)
rb = write_run(os.path.join(WORK, "run70"), ranks=1, fwd=0.020, bwd=0.050, opt=0.002, outside=0.001)
cab = S.Calibration([S.Run(ra), S.Run(rb)])
check(close(S.predict_step(cab, 3, 1, link, "openmpi")["compute"], 0.060),
      "jitter within runs: runs of 50 and 70 ms give 60 ms at 3 ranks (the drift between runs is no jitter)")

# ---- the commands ----
for name, factor in (("meas_ok", 1.05), ("meas_bad", 1.30)):
    write_run(os.path.join(WORK, name), ranks=2, fwd=0.020, bwd=0.040, opt=0.001, outside=(step - 0.061) + (factor - 1) * step)
rc, out = run("check", "--calibrate", cal, "--runs", "100mbit", os.path.join(WORK, "meas_ok"))
check(rc == 0 and "-4.8%" in out, f"check: a run 5% slower than predicted passes, error -4.8% (exit {rc})")
rc, out = run("check", "--calibrate", cal, "--runs", "100mbit", os.path.join(WORK, "meas_bad"))
check(rc == 1 and "FAIL" in out and "-23.1%" in out, f"check: a run 30% slower fails, error -23.1% (exit {rc})")
rc, out = run("predict", "--calibrate", cal, "--link-gbit", "0.1", "--latency-us", "50", "--nodes", "1", "2")
check(rc == 0 and f"{16 / step:.1f}" in out and f"{8 / 0.063:.1f}" in out,
      f"predict prints images/s {8 / 0.063:.1f} at 1 node and {16 / step:.1f} at 2 (exit {rc})")
rc, out = run("predict", "--calibrate", os.path.join(WORK, "missing"), "--link-gbit", "1", "--nodes", "2")
check(rc == 2 and "missing" in out and "Traceback" not in out, f"a missing run: exit 2 and one line (exit {rc})")
rc, out = run("predict", "--calibrate", cal, "--link-gbit", "1", "--nodes", "3", "--global-batch", "8")
check(rc == 2 and "not divisible" in out, f"a global batch the ranks do not divide: exit 2 (exit {rc})")
finish()
