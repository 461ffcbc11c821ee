"""The table and summary.json of jobs/bench/vs_timm.sh, from its run folders.

Per program and mode: the median over rounds of each run's median step time
after the warm-up steps (vitkd: rank 0's /step_wall_seconds in timing.h5;
timm: result.json's step_seconds, rank 0's, recorded on the CPU), images/s = global batch / that
time, MFU = images/s x FLOPs per image (vitkd's count for the same models,
from its result.json) / (the program's own LibTorch's ceiling per core x
cores; timm's: --timm-ceiling, 0 for none), and the ratio of every vitkd
build to every timm peer.
    python3 jobs/bench/vs_timm_summary.py OUT --rounds R --warmup W --batch G ...
"""
import argparse
import json
import os
import platform
import re
import statistics
import subprocess

import h5py


def vitkd_steps(d):
    with h5py.File(os.path.join(d, "timing.h5"), "r") as f:
        return [float(x) for x in f["step_wall_seconds"][()][:, 0]]


def timm_steps(d):
    return [float(x) for x in json.load(open(os.path.join(d, "result.json")))["step_seconds"]]


def median_after(steps, warmup, where):
    if len(steps) <= warmup:
        raise SystemExit(f"{where}: {len(steps)} steps logged, not more than the {warmup} warm-up steps")
    return statistics.median(steps[warmup:])


def libtorch_of(d):
    return json.load(open(os.path.join(d, "result.json"))).get("libtorch", "?")


def cpu_model():
    for line in open("/proc/cpuinfo"):
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("out")
    p.add_argument("--rounds", type=int, required=True)
    p.add_argument("--warmup", type=int, required=True)
    p.add_argument("--batch", type=int, required=True, help="global batch")
    p.add_argument("--ceilings", required=True, help="BUILD=FLOP/s per core, one per vitkd build")
    p.add_argument("--timm-ceiling", type=float, required=True, help="FLOP/s per core for timm's torch; 0: none")
    p.add_argument("--cores", type=int, required=True)
    p.add_argument("--precision", required=True)
    p.add_argument("--builds", required=True)
    p.add_argument("--peers", required=True)
    p.add_argument("--modes", required=True)
    p.add_argument("--python", required=True)
    p.add_argument("--seconds", type=float, default=0)
    a = p.parse_args()
    ceilings = {b: float(c) for b, c in (kv.split("=", 1) for kv in a.ceilings.split())}
    programs = [("vitkd-" + b, "vitkd", b) for b in a.builds.split()] + \
               [("timm-" + q, "timm", q) for q in a.peers.split()]
    flags = open("/proc/cpuinfo").read()
    torch_v = subprocess.run([a.python, "-c", "import torch, timm; print(torch.__version__, timm.__version__)"],
                             capture_output=True, text=True).stdout.split()
    summary = {"cpu": cpu_model(), "cores": os.cpu_count(), "bf16_flags": sorted(
                   {f for f in ("avx512_bf16", "amx_bf16") if re.search(rf"\b{f}\b", flags)}),
               "precision": a.precision, "ceiling_flops_per_core": {
                   **{"vitkd-" + b: c for b, c in ceilings.items()}, "timm": a.timm_ceiling or None},
               "ranks": a.cores,
               "global_batch": a.batch, "rounds": a.rounds, "warmup_steps": a.warmup,
               "torch": torch_v[0] if torch_v else "?", "timm": torch_v[1] if len(torch_v) > 1 else "?",
               "wall_seconds": a.seconds, "modes": {}}
    for mode in a.modes.split():
        flops = None
        rows = {}
        for name, kind, which in programs:
            per_round = []
            for r in range(a.rounds):
                d = os.path.join(a.out, f"{mode}-{kind}-{which}-{r}")
                steps = vitkd_steps(d) if kind == "vitkd" else timm_steps(d)
                per_round.append(median_after(steps, a.warmup, d))
                if kind == "vitkd" and flops is None:
                    flops = json.load(open(os.path.join(d, "result.json")))["flops_per_sample"]
            ceiling = ceilings[which] if kind == "vitkd" else a.timm_ceiling
            row = {"step_seconds_per_round": per_round, "step_seconds": statistics.median(per_round),
                   "ceiling_flops_per_core": ceiling or None}
            row["images_per_second"] = a.batch / row["step_seconds"]
            if kind == "vitkd":
                row["libtorch"] = libtorch_of(os.path.join(a.out, f"{mode}-{kind}-{which}-0"))
            rows[name] = row
        for row in rows.values():
            c = row["ceiling_flops_per_core"]
            row["mfu"] = row["images_per_second"] * flops / (c * a.cores) if flops and c else None
        ratios = {f"{v} / {t}": rows[v]["images_per_second"] / rows[t]["images_per_second"]
                  for v, k, _ in programs if k == "vitkd" for t, k2, _ in programs if k2 == "timm"}
        summary["modes"][mode] = {"flops_per_image": flops, "programs": rows, "ratios": ratios}
    path = os.path.join(a.out, "summary.json")
    with open(path, "w") as f:
        json.dump(summary, f, indent=2)
        f.write("\n")
    print(f"\n{summary['cpu']}, {summary['precision']}, batch {a.batch} on {a.cores} ranks, torch "
          f"{summary['torch']}, timm {summary['timm']}; median of {a.rounds} rounds of the median step after "
          f"{a.warmup} warm-up steps")
    print(f"{'mode':8} {'program':22} {'step s':>8} {'img/s':>7} {'MFU':>5} {'ceiling':>7}  per round (s)")
    for mode, m in summary["modes"].items():
        for name, row in m["programs"].items():
            lib = f" ({row['libtorch']})" if "libtorch" in row else ""
            mfu = f"{row['mfu']:.2f}" if row["mfu"] is not None else "-"
            ceil = f"{row['ceiling_flops_per_core'] / 1e9:.0f}" if row["ceiling_flops_per_core"] else "-"
            print(f"{mode:8} {name + lib:22} {row['step_seconds']:8.3f} {row['images_per_second']:7.2f} {mfu:>5} {ceil:>7}  "
                  + " ".join(f"{x:.3f}" for x in row["step_seconds_per_round"]))
        for k, v in m["ratios"].items():
            print(f"{mode:8} {k:40} {v:.2f}x")
    print(f"-> {path} ({a.seconds:.0f} s)")


if __name__ == "__main__":
    main()
