#!/usr/bin/env python3
"""experiments/sifting/frontier_table.py on planted kept runs: the rule's three stages.

    python3 tests/analysis/test_frontier_table.py SRC_DIR WORK_DIR

Plants what experiments/sifting/frontier.sh keeps: the delay runs (validation 0.9160 at 500, 0.9168
at 1000, 0.9100 at 2000: the rule takes 500, within 0.1 points of the best), C and the nine points at
seeds 11 and 12 (each point's top-1 change and time ratio chosen below), and checks:
- the delay chosen, and --print delay;
- a point's paired figures (mean, t interval, time change) in the stage-2 table;
- the choice: FSb1 saves the most among the points within 0.5 points (FSb2 saves more at -0.8 and is
  passed over); with every point below -0.5 the largest saving within 1.0 points, and the note;
- stage 3: the chosen point at four seeds, met (-35 % at an interval above -0.5) and missed (the
  same time with an interval reaching below -0.5; the seeds' own point at -10 %);
- the profile: C's phases as shares of its time, a point's as shares of C's, the ranking forward per
  sample against C's student forward per sample; seed 12's runs name their phases (phase_names, in
  reverse order), seed 11's do not (the order before result.json named them);
- a point run at another delay than the chosen one, or a kept run whose phases and their names differ
  in number: exit 2, one line;
- --write then --check agree; a figure changed by hand fails --check with one line (exit 1).
"""
import json
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from checks import check, finish  # noqa: E402

src, work = sys.argv[1], os.path.join(sys.argv[2], "frontier_table")
tool = os.path.join(src, "experiments", "sifting", "frontier_table.py")
C_FINAL, C_SECONDS = {"11": 0.915, "12": 0.917, "13": 0.916, "14": 0.918}, 1000.0


def kept(folder, seed, final, seconds, delay=500, beta=None, val=None, kept_fraction=1.0, epochs=None,
         phases=(0.2, 0.0, 0.3, 0.45)):
    """A run as experiments/distillation/keep_run.py keeps it; phases: its teacher forward, ranking
    forward, student forward and backward as shares of its own training time (rank 0's)."""
    os.makedirs(folder)
    sift = "" if beta is None else f"\n[sift]\nenabled = true\nbeta = {beta}\ndelay = {delay}\n"
    evals = [{"step": 10, "epoch": 1, "train_seconds": seconds / 2, "val_top1": 0.8},
             {"step": 20, "epoch": 2, "train_seconds": seconds, "val_top1": final if val is None else val}]
    json.dump({"test_top1": final, "steps": 20, "epochs": 2, "seed": seed, "eval_split": "val",
               "evaluations": evals, "world_size": 2, "compute": "bf16", "libtorch": "1.13.0",
               "kept_fraction": kept_fraction, "vitkd_version": "0.4.7", "samples_seen": 1000,
               "phase_seconds_rank0": [0.0] + [f * seconds for f in phases] + [0.0] * 5, "epoch_seconds": epochs or [], "finished_utc": "2026-12-07 10:00 UTC",
               "config": f"[run]\nseed = {seed}\n\n[train]\nepochs = 2\n\n[precision]\ncompute = \"bf16\"\n" + sift},
              open(os.path.join(folder, "result.json"), "w"))
    if int(seed) == 12:  # result.json names its phases from 2026-12-07 (here in reverse order); older runs do not
        r = json.load(open(os.path.join(folder, "result.json")))
        r["phase_names"] = ["eval", "checkpoint", "all_gather", "optimizer", "comm_wait", "backward",
                            "student_forward", "sift_forward", "teacher_forward", "data_wait"]
        r["phase_seconds_rank0"] = r["phase_seconds_rank0"][::-1]
        json.dump(r, open(os.path.join(folder, "result.json"), "w"))
    json.dump({"median_step_ms": 10.0, "cpu": "Planted CPU (amx_bf16)"}, open(os.path.join(folder, "timing-summary.json"), "w"))


def plant(points, seeds=("11", "12"), delays=True, extra=(), c_epochs=None, epochs=None):
    """points: {name: (top-1 change per seed in points, time ratio)}; c_epochs and epochs: C's and the
    points' epoch_seconds; returns the results folder."""
    shutil.rmtree(work, ignore_errors=True)
    results = os.path.join(work, "results")
    if delays:
        for d, v in ((500, 0.9160), (1000, 0.9168), (2000, 0.9100)):
            kept(f"{results}/FSb1d{d}-s11", 11, 0.91, 900.0, delay=d, beta=1, val=v)
    for s in seeds:
        kept(f"{results}/C-s{s}", int(s), C_FINAL[s], C_SECONDS, epochs=c_epochs)
        for name, (change, ratio) in points.items():
            beta = name.split("b")[1].split("d")[0]
            kept(f"{results}/{name}-s{s}", int(s), C_FINAL[s] + change[s] / 100, ratio * C_SECONDS, beta=beta,
                 kept_fraction=1 / (1 + float(beta)), epochs=epochs,
                 phases=(0.15, 0.25, 0.2, 0.35) if name.startswith("FS") else (0.2, 0.0, 0.3, 0.45))
    for folder, seed, final, seconds, delay in extra:
        kept(f"{results}/{folder}", seed, final, seconds, delay=delay, beta=1)
    return results


def run(results, *args):
    return subprocess.run([sys.executable, tool, "--results", results, "--summary", ""] + list(args),
                          capture_output=True, text=True)


NINE = ("FSb0.5", "FIb0.5", "FTb0.5", "FSb1", "FIb1", "FTb1", "FSb2", "FIb2", "FTb2")
grid = {p: ({"11": -0.1, "12": -0.3, "13": -0.2, "14": -0.2}, 0.90) for p in NINE}
grid["FSb1"] = ({"11": -0.3, "12": -0.4, "13": -0.35, "14": -0.35}, 0.65)   # mean -0.35: within 0.5 points
grid["FSb2"] = ({"11": -0.7, "12": -0.9, "13": -0.8, "14": -0.8}, 0.55)   # saves more, but -0.80
results = plant(grid)

p = run(results, "--print", "delay")
check(p.returncode == 0 and "the rule chooses DELAY=500" in p.stdout,
      f"stage 1: 500 is within 0.1 points of 1000's best (got {p.returncode}: {p.stdout.strip()!r} {p.stderr.strip()!r})")
p = run(results)
out = p.stdout
check(p.returncode == 0, f"exit 0 (got {p.returncode}: {p.stderr.strip()})")
check("| FSb1 | scope \"sample\", separate pass, β 1 | 2 | 0.50 |" in out and "| -0.35 | [-0.99, +0.29] | -, - | -35.0 %, "
      "95 % [-35.0 %, -35.0 %] |" in out, "stage 2: FSb1's paired mean, t interval (1 degree of freedom), time")
check("| C | 11, 12 | 20 % | 0 % | 30 % | 45 % | 5 % | 100 % |  |" in out,
      "the profile: C's phases as shares of its own time")
check("| FSb1 | 11, 12 | 10 % | 16 % | 13 % | 23 % | 3 % | 65 % | 0.54 |" in out,
      "the profile: FSb1's phases as shares of C's time (0.65 of it), its ranking forward per sample against "
      "C's student forward per sample")
check("Stage 2 has 20 of its 20 runs. The point it chooses: **FSb1**." in out,
      "the choice: the largest saving within 0.5 points (FSb2's larger saving at -0.80 passed over)")
check("| FSb1 | 0 | | | | | not run yet |" not in out and "| FSb1 | 2 | -0.35 |" in out and "pending (2 of 4 seeds)" in out,
      "stage 3 with two of four seeds: pending")

# Stage 3 complete: FSb1 at -0.35 mean with a narrow interval and -35 %: met; FSb0.5 at -10 %: missed.
results = plant(grid, seeds=("11", "12", "13", "14"))
out = run(results).stdout
check("| FSb1 | 4 | -0.35 | [-0.41, -0.29] | -, -, -, - | -35.0 %, 95 % [-35.0 %, -35.0 %] | **met** |" in out,
      "stage 3: -35 % with the interval above -0.5 points: met")
check("| FSb0.5 | 4 | -0.20 |" in out and "| -10.0 %, 95 % [-10.0 %, -10.0 %] | **missed** |" in out,
      "stage 3: the seeds' own point at -10 %: missed")
wide = dict(grid, FSb1=({"11": -0.3, "12": -0.4, "13": -0.7, "14": -0.2}, 0.65))  # mean -0.40, interval below -0.5
out = run(plant(wide, seeds=("11", "12", "13", "14"))).stdout
check("| FSb1 | 4 | -0.40 | [-0.74, -0.06] |" in out and "| -35.0 %, 95 % [-35.0 %, -35.0 %] | **missed** |" in out,
      "stage 3: -35 % at a mean of -0.40 points whose interval reaches below -0.5: missed")
s = subprocess.run([sys.executable, tool, "--results", results, "--readme", os.devnull, "--summary", "", "--print",
                    "points"], capture_output=True, text=True)
check(s.stdout.split() == list(NINE), f"--print points: the grid in frontier.sh's order (got {s.stdout.strip()!r})")
s = run(results, "--print", "stage3-new-seeds")
check(s.stdout.split() == ["13", "14"], f"--print stage3-new-seeds: stage 3's seeds stage 2 did not run, where C and E "
      f"run again (got {s.stdout.strip()!r})")

# The host's pace: C slowed early (epochs 3-10 at 40 s, the last 8 at 32 s), the points steady.
drift = [50.0, 45.0] + [40.0] * 8 + [36.0] * 8 + [32.0] * 8
out = run(plant(grid, c_epochs=drift, epochs=[50.0, 45.0] + [30.0] * 24)).stdout
check("seed 11: C 0.80, the points 1.00–1.00; seed 12: C 0.80, the points 1.00–1.00." in out,
      "the pace line: C's drift (0.80) beside the points' (1.00), per seed")
check("The host's pace" not in run(plant(grid)).stdout, "no pace line for runs without epoch times")

# No point within 0.5 points: the largest saving within 1.0, and the note.
low = {p: ({"11": -1.5, "12": -1.5}, 0.9) for p in NINE}
low["FTb1"] = ({"11": -0.7, "12": -0.9}, 0.8)
low["FIb2"] = ({"11": -0.8, "12": -0.8}, 0.7)
out = run(plant(low)).stdout
check("no point is within 0.5 points of C; within 1.0 points: **FIb2**." in out,
      "no point within 0.5 points: the largest saving within 1.0, said so")

# A point kept at another delay than stage 1's choice.
bad = plant({}, extra=[("FSb1-s11", 11, 0.91, 700.0, 1000)])
p = run(bad)
check(p.returncode == 2 and p.stderr.count("\n") == 1 and "FSb1-s11 ran at sift.delay 1000, stage 1 chose 500" in p.stderr,
      f"a point at another delay: exit 2, one line (got {p.returncode}: {p.stderr.strip()!r})")
short = plant({})
r = json.load(open(f"{short}/C-s11/result.json"))
r["phase_seconds_rank0"] = r["phase_seconds_rank0"][:4]
json.dump(r, open(f"{short}/C-s11/result.json", "w"))
p = run(short)
check(p.returncode == 2 and p.stderr.count("\n") == 1 and "4 phase_seconds_rank0 for 10 phase names" in p.stderr,
      f"a kept run whose phases and names differ in number: exit 2, one line (got {p.returncode}: {p.stderr.strip()!r})")
p = run(plant({}, delays=False), "--print", "delay")
check(p.returncode == 2 and "stage 1 has 0 of its 3 runs" in p.stderr, f"--print delay before stage 1: exit 2 (got {p.returncode})")

# --write then --check; a figure edited by hand.
results = plant(grid)
readme = os.path.join(work, "README.md")
open(readme, "w").write("# x\n\n<!-- BEGIN experiments/sifting/frontier_table.py: generated from results/; edit the files, "
                        "not this block -->\n<!-- END experiments/sifting/frontier_table.py -->\n\nafter\n")
w = run(results, "--readme", readme, "--write", "--plot", os.path.join(work, "frontier.png"))
c = run(results, "--readme", readme, "--check")
text = open(readme).read()
check(w.returncode == 0 and c.returncode == 0 and text.endswith("\n\nafter\n") and "**FSb1**" in text
      and os.path.getsize(os.path.join(work, "frontier.png")) > 1000,
      f"--write then --check agree, the plot drawn (got {w.returncode}: {w.stderr.strip()!r}, {c.returncode})")
open(readme, "w").write(text.replace("| -0.35 |", "| -0.31 |", 1))
c = run(results, "--readme", readme, "--check")
check(c.returncode == 1 and c.stderr.count("\n") == 1 and "-0.31" in c.stderr and "--write" in c.stderr,
      f"a README figure unlike the files: exit 1, one line (got {c.returncode}: {c.stderr.strip()!r})")
finish()
