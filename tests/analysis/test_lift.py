#!/usr/bin/env python3
"""Self-contained test of experiments/distillation/lift.py on planted runs.

    python3 tests/analysis/test_lift.py SRC_DIR WORK_DIR

Writes, under WORK_DIR/lift (replaced), the folders experiments/distillation/lift.sh leaves:
member-s4/ and alone-s2/ (students alone), member-s5/ (a member of 21
epochs: not counted as the student alone), distill-s2/ (distilled: every
evaluation 0.01 above alone-s2's at the same times), each with a result.json
and a timing.h5 ("vitkd-timing" v1, step_wall_seconds only), and cache.log
(a 50 s teacher pass), and live-s2/ and sift-s2/ (the live teacher without
and with sifting: 100 s and 60 s; sift-b4-s2/, beta 4: 50 s). Checks what lift.py reports: the lift against the same
seed (+1.00 points) and against all runs alone, the step-time ratio, the
budgets from which the distilled student is ahead, and exit 2 with one line
for a missing run and for a cache log without its closing line.
"""
import json
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from checks import check, finish  # noqa: E402

try:
    import h5py
    import numpy as np
except ImportError as e:
    print(f"SKIP: {sys.executable} lacks {e.name} (Debian: python3-<module>; Spack: py-<module>)")
    sys.exit(77)

src, work = sys.argv[1], os.path.join(sys.argv[2], "lift")
shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)


RECIPE = '[run]\nmode = "{mode}"\nseed = {seed}\n\n[model]\ndim = {dim}\n\n[train]\nepochs = {epochs}\n'


def run(name, accs, step_s, final=None, seed=None, dim=96, predictions=None, epochs=None, time_scale=1.0):
    d = os.path.join(work, name)
    os.makedirs(d)
    seed = int(name.rsplit("-s", 1)[1]) if seed is None else seed
    evals = [{"step": 10 * (i + 1), "epoch": i + 1, "samples_seen": 0, "train_seconds": 10.0 * (i + 1) * time_scale,
              "elapsed_seconds": 10.0 * (i + 1), "test_top1": a} for i, a in enumerate(accs)]
    # result.json's own train_seconds includes the evaluations: lift.py must not use it.
    json.dump({"test_top1": accs[-1] if final is None else final, "train_seconds": 10.0 * len(accs) + 7,
               "steps": 10 * len(accs), "epochs": epochs or len(accs), "teacher_forwards": 0, "evaluations": evals,
               "seed": seed, "eval_split": "test",
               "config": RECIPE.format(mode="distill" if name.startswith(("distill", "live", "sift")) else "teacher",
                                       seed=seed, dim=dim, epochs=epochs or len(accs))},
              open(os.path.join(d, "result.json"), "w"))
    if predictions:
        json.dump({"split": "test", "labels": predictions[0], "predictions": predictions[1]},
                  open(os.path.join(d, "test_predictions.json"), "w"))
    with h5py.File(os.path.join(d, "timing.h5"), "w") as f:
        f.attrs["format"] = "vitkd-timing"
        f.attrs["format_version"] = 1
        wall = np.full((100, 2), step_s)
        wall[::10, 1] = 10 * step_s  # slow outliers: the median ignores them
        f["step_wall_seconds"] = wall


alone = [0.50 + 0.04 * i for i in range(10)]
# 100 test samples: both right on 80, only alone-s2 right on 2, only distill-s2 right on 10, both wrong on 8:
# McNemar's exact p = 2 * P(Binomial(12, 1/2) <= 2) = 2 * 79 / 4096 = 0.0386.
LABELS = [i % 10 for i in range(100)]
wrong = lambda y: (y + 1) % 10
ALONE_P = [y if i < 82 else wrong(y) for i, y in enumerate(LABELS)]
KD_P = [y if i < 80 or 82 <= i < 92 else wrong(y) for i, y in enumerate(LABELS)]
run("alone-s2", alone, 0.050, predictions=(LABELS, ALONE_P))
run("member-s4", [a - 0.02 for a in alone], 0.080)  # slower machine: must not enter the times
run("member-s5", [0.50 + 0.018 * i for i in range(20)] + [0.85], 0.050)  # 21 epochs: not the student alone
run("distill-s2", [a + 0.01 for a in alone], 0.051, predictions=(LABELS, KD_P))
for log in ("member-s4.log", "sift-b4-s2.log"):  # experiments/distillation/lift.sh's logs lie next to the run folders
    open(os.path.join(work, log), "w").write("done\n")
with open(os.path.join(work, "cache.log"), "w") as f:
    f.write("teacher-cache: the teacher's test top-1 0.9500 (10000 test samples)\n"
            "teacher-cache: wrote x.h5: 1000 views, 1.0 MB (73.0 bytes per view), 1000 teacher forward passes, 50.0 s\n")

run("live-s2", [a + 0.01 for a in alone], 0.090)
# The same 10 epochs in less time (fewer evaluations planted, at the same times as alone-s2's):
run("sift-s2", [a + 0.01 for a in alone[:6]], 0.060, final=0.865, epochs=10)  # 60 s instead of 100 s
run("sift-b4-s2", [a + 0.01 for a in alone[:5]], 0.050, final=0.855, epochs=10)  # beta 4: 50 s

lift = os.path.join(src, "experiments", "distillation", "lift.py")


p = subprocess.run([sys.executable, lift, "--runs", work, "--seeds", "2", "--out", os.path.join(work, "lift.md"),
                    "--figure", os.path.join(work, "lift.png")], capture_output=True, text=True)
out = p.stdout
check(p.returncode == 0, f"exit 0 (got {p.returncode}: {p.stderr.strip()})")
check("lift **+1.00 points**" in out, "lift against the same seed is +1.00 points")
check("against all 2 runs alone (0.8500) +2.00 points" in out, "lift against all runs alone (the member 0.02 lower)")
check("member-s5, 21 epochs: 0.8500." in out, "a member of another schedule listed apart")
# member-s5 (0.50 + 0.018 i at 10 (i + 1) s, 0.85 at 210 s) is below distill-s2 at every budget; charged
# the 50 s pass, distill-s2 (0.51 + 0.04 k at 60 + 10 k s) passes it at 100 s (0.67 against 0.662).
check("(member-s5, mean; their times as measured) the distilled students are ahead: with the cache's pass not "
      "counted, at every budget; amortised over S = 1, at every budget from 100 s on" in out,
      "ahead of the members' longer schedule, and when charged the pass")
check("+9.00 points over the students alone at the same seeds" in out, "the teacher's margin from the cache log")
check("distilled from the cache 51.0 ms, alone 50.0 ms (+2.0 %)" in out, "median step times, member excluded")
check("with the cache's pass not counted, at every budget;" in out, "ahead everywhere when the pass is not counted")
# Charged the whole pass (S = 1) the distilled curve starts 50 s late: behind
# until it ends above the alone's end (150 s). At S = 10 (5 s late) each of
# its evaluations is ahead for 5 s and behind at the alone's next one, so it
# is ahead for good only once the alone run has ended (105 s).
check("amortised over S = 1, at every budget from 150 s on" in out, "behind until its end with the whole pass charged")
check("amortised over S = 10 (extrapolated), at every budget from 105 s on" in out, "ahead for good only after the alone's end at S = 10")
check("| 2 | 0.8600 | 0.8700 | +1.00 | 2 | 10 | 0.0386 |" in out, "paired row: the difference and McNemar's test")
check("Mean paired difference +1.00 points over 1 seeds; 95 % interval not defined with one seed." in out,
      "one seed: no interval")
check("Sifting: wall time -40.0 %, test top-1 -0.50 points." in out, "sifting against the live teacher")
check("Sifting (beta 4): wall time -50.0 %, test top-1 -1.50 points." in out, "a second beta, named by its folder")
png = os.path.join(work, "lift.png")
check(os.path.exists(png) and os.path.getsize(png) > 1000, "figure written")
check(open(os.path.join(work, "lift.md")).read().rstrip("\n") == out.rstrip("\n"), "--out holds what was printed")

# The runs kept small (experiments/distillation/keep_run.py: result.json, the predictions and the median step time,
# not timing.h5) give lift.py the same report as the runs themselves (experiments/distillation/compare.sh keeps runs so).
keep, kept = os.path.join(src, "experiments", "distillation", "keep_run.py"), work + "-kept"
shutil.rmtree(kept, ignore_errors=True)
kept_ok = True
for name in sorted(os.listdir(work)):
    if os.path.isdir(os.path.join(work, name)):
        k = subprocess.run([sys.executable, keep, os.path.join(work, name), os.path.join(kept, name)],
                           capture_output=True, text=True)
        kept_ok = kept_ok and k.returncode == 0 and not os.path.exists(os.path.join(kept, name, "timing.h5"))
shutil.copyfile(os.path.join(work, "cache.log"), os.path.join(kept, "cache.log"))
p = subprocess.run([sys.executable, lift, "--runs", kept, "--seeds", "2"], capture_output=True, text=True)
check(kept_ok and p.returncode == 0 and p.stdout.replace(kept, work) == out,
      f"kept runs (no timing logs) report as the runs do (got {p.returncode}: {p.stderr.strip()})")
os.remove(os.path.join(kept, "distill-s2", "result.json"))
k = subprocess.run([sys.executable, keep, os.path.join(kept, "distill-s2"), os.path.join(kept, "again")],
                   capture_output=True, text=True)
check(k.returncode == 2 and k.stderr.count("\n") == 1 and "result.json" in k.stderr
      and not os.path.exists(os.path.join(kept, "again")),
      f"keep_run.py on an unfinished run: exit 2, one line, nothing written (got {k.returncode}: {k.stderr.strip()})")

# A longer schedule that ends above the distilled student: behind at the end, ahead until then.
shutil.rmtree(os.path.join(work, "member-s5"))
run("member-s5", [0.50 + 0.018 * i for i in range(20)] + [0.99], 0.050)
p = subprocess.run([sys.executable, lift, "--runs", work, "--seeds", "2"], capture_output=True, text=True)
check("with the cache's pass not counted, behind at the end; ahead at every budget from 10 s to 200 s;" in p.stdout,
      "behind a longer schedule at its end: the stretch where the distilled student is ahead")

# Two seeds: the 95 % interval of the paired differences (+1.00 and +3.00: mean +2.00, sd 1.414,
# t(0.975, 1) = 12.706: half-width 12.706 * 1.414 / sqrt(2) = 12.71 points).
run("alone-s3", alone, 0.050)
run("distill-s3", [a + 0.03 for a in alone], 0.051, time_scale=1.5)
p = subprocess.run([sys.executable, lift, "--runs", work, "--seeds", "2 3"], capture_output=True, text=True)
check("Mean paired difference +2.00 points over 2 seeds; 95 % interval [-10.71, +14.71] points (t, 1 degrees "
      "of freedom)." in p.stdout, f"the paired interval over two seeds (got {p.returncode}: {p.stderr.strip()})")
# Training time per seed: +0 % (seed 2) and +50 % (distill-s3 planted 1.5 times as long): mean +25.0 %,
# half-width 12.706 * 0.3536 / sqrt(2) = 317.7 %.
check("| 3 | 0.8600 | 0.8900 | +3.00 | - | - | - | +50.0 % |" in p.stdout and
      "distilled/alone - 1: mean +25.0 %; 95 % interval [-292.7 %, +342.7 %]." in p.stdout,
      "the paired training-time change and its interval")


def refused(what, needle, seeds="2 3"):
    """lift.py refuses: exit 2, one line on stderr containing `needle`, no table on stdout."""
    p = subprocess.run([sys.executable, lift, "--runs", work, "--seeds", seeds], capture_output=True, text=True)
    check(p.returncode == 2 and p.stderr.count("\n") == 1 and needle in p.stderr and p.stdout == "",
          f"{what}: exit 2, one line, no table (got {p.returncode}: {p.stderr.strip()!r}, stdout {len(p.stdout)} chars)")


for name, kwargs, needle, what in (
        ("distill-s3", {"seed": 4}, "mismatched seeds: distill-s3 was trained with run.seed = 4", "a seed unlike its folder"),
        ("alone-s3", {"dim": 128}, "mismatched recipes: model.dim = 96 in distill-s2, 128 in alone-s3", "another recipe"),
        ("alone-s3", {"accs": alone + [0.9]}, "mismatched epochs among the distilled students and the students alone",
         "another number of epochs")):
    shutil.rmtree(os.path.join(work, name))
    run(name, kwargs.pop("accs", [a + 0.03 for a in alone] if name.startswith("distill") else alone), 0.05, **kwargs)
    refused(what, needle)
    shutil.rmtree(os.path.join(work, name))
    run(name, [a + 0.03 for a in alone] if name.startswith("distill") else alone, 0.05)
# A live teacher (no cache.log): its forward passes are in the times; nothing is charged.
os.rename(os.path.join(work, "cache.log"), os.path.join(work, "cache.log.away"))
p = subprocess.run([sys.executable, lift, "--runs", work, "--seeds", "2 3", "--live"], capture_output=True, text=True)
check(p.returncode == 0 and "The teacher ran live" in p.stdout and
      "(mean): with the live teacher's forward passes counted, at every budget." in p.stdout,
      f"--live: no cache log, nothing charged (got {p.returncode}: {p.stderr.strip()})")
os.rename(os.path.join(work, "cache.log.away"), os.path.join(work, "cache.log"))
# A baseline of another schedule, on purpose (32 against 64 epochs): --epochs-may-differ.
os.rename(os.path.join(work, "alone-s2"), os.path.join(work, "alone-s2.away"))
for n in ("alone-s2", "alone-s3"):
    shutil.rmtree(os.path.join(work, n), ignore_errors=True)
    run(n, alone + [0.9], 0.05)
p = subprocess.run([sys.executable, lift, "--runs", work, "--seeds", "2 3", "--epochs-may-differ"],
                   capture_output=True, text=True)
check(p.returncode == 0 and "| 3 | 0.9000 | 0.8900 | -1.00 |" in p.stdout,
      f"--epochs-may-differ pairs runs of other schedules (got {p.returncode}: {p.stderr.strip()})")
refused("other schedules without --epochs-may-differ", "mismatched epochs among the distilled students and")
for n in ("alone-s2", "alone-s3"):
    shutil.rmtree(os.path.join(work, n))
os.rename(os.path.join(work, "alone-s2.away"), os.path.join(work, "alone-s2"))
refused("a distilled seed without its student alone", "mismatched seeds: distilled at 2, 3, alone at 2")
shutil.rmtree(os.path.join(work, "distill-s3"))

shutil.rmtree(os.path.join(work, "distill-s2"))
p = subprocess.run([sys.executable, lift, "--runs", work, "--seeds", "2"], capture_output=True, text=True)
check(p.returncode == 2 and p.stderr.count("\n") == 1 and "distill-s2/result.json" in p.stderr,
      f"a missing run: exit 2, one line naming it (got {p.returncode}: {p.stderr.strip()})")
run("distill-s2", [a + 0.01 for a in alone], 0.051)
open(os.path.join(work, "cache.log"), "w").write("teacher-cache: epoch 1 of 32: 60000 views in 18.2 s\n")
p = subprocess.run([sys.executable, lift, "--runs", work, "--seeds", "2"], capture_output=True, text=True)
check(p.returncode == 2 and "cache.log" in p.stderr and "did the cache finish" in p.stderr,
      f"an unfinished cache: exit 2 naming the log (got {p.returncode}: {p.stderr.strip()})")

finish()
