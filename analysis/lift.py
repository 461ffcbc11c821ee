#!/usr/bin/env python3
"""The lift of distillation over the student trained alone: equal epochs, equal wall time, sifting.

    /usr/bin/python3 analysis/lift.py --runs RUNS [--seeds "2 3"] [--sift-seed 2] \\
        [--cache-log RUNS/cache.log] [--out lift.md] [--figure lift.png]

RUNS is the folder jobs/lift.sh writes: member-s<N>/ (the ensemble's members:
the student recipe trained alone), alone-s<N>/ (the student alone at the
compared seeds), distill-s<N>/ (the student distilled from the teacher-view
cache) and cache.log (the log of `vitkd teacher-cache`). Each run folder holds
the result.json of `vitkd train`: `test_top1`, `train_seconds`, `epochs` and
`evaluations` (per evaluation `epoch`, `train_seconds`, `test_top1`).

Every run of the student recipe without a teacher counts as "student alone":
the members and alone-s<N>, except members trained for another number of
epochs than the distilled students (listed apart). Written to --out (markdown) and printed:

(a) equal epochs: each run's final test top-1; the lift is the mean of the
    distilled students minus the mean of the students alone, in points;
(b) equal wall time: at budgets of training time, the mean test top-1 of the
    last evaluation each run had reached by then, the distilled students
    charged their cache's one-off teacher pass amortised over S students
    (S = 1, the students this folder holds, and 10), and from which budget on
    the distilled students are ahead at every budget to the end; when members
    of another schedule exist, the same against them (the student alone
    given more epochs).
The lift and every time use the students alone at the distilled students'
seeds (alone-s<N>) when they exist, all students alone otherwise; (a) also
gives the lift against all of them.
(c) when live-s<N>/ and sift-s<N>/ or sift-b<B>-s<N>/ exist (N = --sift-seed):
    the student distilled from the live teacher without and with sifting
    (beta 2, or beta B), wall time and test top-1.
The figure (--figure, PNG) draws test top-1 against training wall time.

Exit status: 0, or 2 when a run or the cache log is missing or malformed
(one line on stderr naming the file).
"""
import argparse
import glob
import json
import os
import re
import statistics
import sys


class InputError(Exception):
    """A result.json or cache log that is missing or malformed."""


def load_run(folder):
    path = os.path.join(folder, "result.json")
    try:
        with open(path) as fh:
            r = json.load(fh)
        evals = [(float(e["train_seconds"]), float(e["test_top1"]), int(e["epoch"])) for e in r["evaluations"]]
        final = float(r["test_top1"])
        epochs = int(r["epochs"])
        train_s = float(r["train_seconds"])
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise InputError(f"{path}: {e}")
    if not evals or final < 0:
        raise InputError(f"{path}: no evaluations (was train.final_eval off?)")
    return {"name": os.path.basename(folder), "final": final, "train_seconds": train_s, "evals": evals,
            "epochs": epochs,
            "step_ms": median_step_ms(os.path.join(folder, "timing.h5")),
            "teacher_forwards": r.get("teacher_forwards"),
            "cache_read_s": r.get("teacher_cache_read_seconds"),
            "agreement": r.get("teacher_agreement"), "teacher_top1": r.get("teacher_test_top1")}


def median_step_ms(path):
    """Median over steps of the slowest rank's step wall time in a timing log (ms)."""
    import h5py
    import numpy as np
    try:
        with h5py.File(path, "r") as f:
            wall = np.asarray(f["step_wall_seconds"])
    except (OSError, KeyError) as e:
        raise InputError(f"{path}: {e}")
    return 1e3 * float(np.median(wall.max(axis=1)))


CACHE_DONE = re.compile(r"teacher-cache: wrote .*?: (\d+) views, ([\d.]+) MB .*?, (\d+) teacher forward passes, "
                        r"([\d.]+) s")
CACHE_TOP1 = re.compile(r"teacher-cache: the teacher's test top-1 ([\d.]+)")


def load_cache_log(path):
    try:
        text = open(path).read()
    except OSError as e:
        raise InputError(f"{path}: {e}")
    done = CACHE_DONE.search(text)
    if not done:
        raise InputError(f"{path}: no 'teacher-cache: wrote ...' line (did the cache finish?)")
    top1 = CACHE_TOP1.search(text)
    return {"views": int(done.group(1)), "mb": float(done.group(2)), "forwards": int(done.group(3)),
            "seconds": float(done.group(4)), "teacher_top1": float(top1.group(1)) if top1 else None}


def acc_at(run, budget, offset=0.0):
    """Test top-1 of the last evaluation `run` had reached after `budget` s (None before its first)."""
    best = None
    for t, acc, _ in run["evals"]:
        if t + offset <= budget:
            best = acc
    return best


def mean_at(runs, budget, offset=0.0):
    vals = [acc_at(r, budget, offset) for r in runs]
    return None if any(v is None for v in vals) else statistics.mean(vals)


def budgets_of(kd, alone, offset):
    """Every evaluation time of either kind (the distilled ones shifted by `offset`), sorted."""
    return sorted({t for r in alone for t, _, _ in r["evals"]} |
                  {t + offset for r in kd for t, _, _ in r["evals"]})


def behind(kd, alone, budget, offset):
    """The distilled mean below the alone mean at `budget`; a kind without an evaluation yet is
    behind one that has one."""
    k, a = mean_at(kd, budget, offset), mean_at(alone, budget)
    return a is not None and (k is None or k < a)


def ahead_from(kd, alone, offset):
    """The earliest budget (s) from which on the distilled mean is at or above the alone mean at
    every budget (every evaluation time of either kind) up to the end, or None."""
    start = None
    for b in budgets_of(kd, alone, offset):
        if behind(kd, alone, b, offset):
            start = None
        elif start is None:
            start = b
    return start


def longest_ahead(kd, alone, offset):
    """The longest stretch of budgets (first, last, in s) over which the distilled mean has an
    evaluation and is at or above the alone mean at every budget, or None."""
    best, start = None, None
    for b in budgets_of(kd, alone, offset):
        if behind(kd, alone, b, offset) or mean_at(kd, b, offset) is None:
            start = None
            continue
        start = b if start is None else start
        if best is None or b - start > best[1] - best[0]:
            best = (start, b)
    return best


def pts(x):
    return f"{100 * x:+.2f}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", required=True)
    ap.add_argument("--seeds", default="2 3", help="seeds of the distilled students (and alone-s<N>)")
    ap.add_argument("--cache-log", default=None, help="default RUNS/cache.log")
    ap.add_argument("--sift-seed", default=None, help="seed of live-s<N>/ and sift-s<N>/ (default: the first of --seeds)")
    ap.add_argument("--out", default=None)
    ap.add_argument("--figure", default=None)
    a = ap.parse_args()
    try:
        seeds = a.seeds.split()
        kd = [load_run(os.path.join(a.runs, f"distill-s{s}")) for s in seeds]
        runs_alone = [load_run(d) for d in sorted(
            [d for d in glob.glob(os.path.join(a.runs, "member-s*")) if os.path.isdir(d)] +
            [d for d in (os.path.join(a.runs, f"alone-s{s}") for s in seeds) if os.path.isdir(d)])]
        # A member trained for another number of epochs than the students (a longer
        # schedule for a better teacher) is not the student alone.
        epochs = kd[0]["epochs"]
        alone = [r for r in runs_alone if r["epochs"] == epochs]
        other = [r for r in runs_alone if r["epochs"] != epochs]
        if not alone:
            raise InputError(f"{a.runs}: no member-s*/ or alone-s*/ run of {epochs} epochs (the students alone)")
        # The same seeds as the distilled students, when run: the paired baseline, and the
        # only one used for times (the members may have run on a busier machine).
        paired = [r for r in alone if r["name"].startswith("alone-s")] or alone
        cache = load_cache_log(a.cache_log or os.path.join(a.runs, "cache.log"))
    except InputError as e:
        print(f"lift.py: {e}", file=sys.stderr)
        return 2

    out = []
    m_kd = statistics.mean(r["final"] for r in kd)
    m_alone = statistics.mean(r["final"] for r in alone)
    m_paired = statistics.mean(r["final"] for r in paired)
    out.append("### (a) Equal epochs: final test top-1\n")
    out.append("| run | test top-1 | training time (s) | median step (ms) | teacher forward passes |")
    out.append("|---|---|---|---|---|")
    for r in alone + kd:
        out.append(f"| {r['name']} | {r['final']:.4f} | {r['train_seconds']:.0f} | {r['step_ms']:.1f} | "
                   f"{r['teacher_forwards'] if r['teacher_forwards'] is not None else '-'} |")
    out.append("")
    if other:
        out.append("The teacher's members trained for another number of epochs (not counted as the student alone): " +
                   "; ".join(f"{r['name']}, {r['epochs']} epochs: {r['final']:.4f}" for r in other) + ".\n")
    out.append(f"Mean: distilled {m_kd:.4f} (seeds {', '.join(seeds)}), alone at the same seeds "
               f"{m_paired:.4f}: lift **{pts(m_kd - m_paired)} points**; against all {len(alone)} runs alone "
               f"({m_alone:.4f}) {pts(m_kd - m_alone)} points; worst distilled minus best alone "
               f"{pts(min(r['final'] for r in kd) - max(r['final'] for r in alone))} points.")
    if cache["teacher_top1"] is not None:
        out.append(f"The teacher (the cache's) has test top-1 {cache['teacher_top1']:.4f}: "
                   f"{pts(cache['teacher_top1'] - m_paired)} points over the students alone at the same seeds, "
                   f"{pts(cache['teacher_top1'] - m_alone)} over all of them.")
    step_kd = statistics.median(r["step_ms"] for r in kd)
    step_alone = statistics.median(r["step_ms"] for r in paired)
    out.append(f"Median step (median over the runs of each kind; alone: {', '.join(r['name'] for r in paired)}): "
               f"distilled from the cache {step_kd:.1f} ms, alone {step_alone:.1f} ms "
               f"({100 * (step_kd / step_alone - 1):+.1f} %).")
    out.append("")

    students = len(kd)
    out.append("### (b) Equal wall time: mean test top-1 reached within a training-time budget\n")
    out.append(f"The cache's one-off teacher pass took {cache['seconds']:.0f} s ({cache['forwards']} teacher "
               f"forward passes, {cache['mb']:.0f} MB); a distilled student is charged it divided by the "
               f"number of students S that replay the cache.\n")
    out.append(f"Students alone in this part: {', '.join(r['name'] for r in paired)}.\n")
    alone_times = sorted({t for r in paired for t, _, _ in r["evals"]})
    shown = [alone_times[i] for i in sorted({0, len(alone_times) // 8, len(alone_times) // 4,
                                             len(alone_times) // 2, 3 * len(alone_times) // 4,
                                             len(alone_times) - 1})]
    s_list = sorted({1, students, 10})
    shown += [max(r["train_seconds"] for r in kd) + cache["seconds"] / s for s in reversed(s_list)]
    shown = sorted({round(b) for b in shown if mean_at(paired, b) is not None})
    out.append("| budget (s) | alone | " + " | ".join(f"distilled, S = {s}" for s in s_list) + " |")
    out.append("|---|---|" + "---|" * len(s_list))
    fmt = lambda v: "-" if v is None else f"{v:.4f}"
    for b in shown:
        out.append(f"| {b:.0f} | {fmt(mean_at(paired, b))} | " +
                   " | ".join(fmt(mean_at(kd, b, cache['seconds'] / s)) for s in s_list) + " |")
    out.append("")
    def ahead_text(offset, base):
        b = ahead_from(kd, base, offset)
        if b is None:
            span = longest_ahead(kd, base, offset)
            return ("behind at the end; never ahead" if span is None else
                    f"behind at the end; ahead at every budget from {span[0]:.0f} s to {span[1]:.0f} s")
        first = min(t for r in base for t, _, _ in r["evals"])
        return "at every budget" if b <= first else f"at every budget from {b:.0f} s on"
    def ahead_clauses(base):
        return (f"with the cache's pass not counted, {ahead_text(0.0, base)}; " +
                "; ".join(f"amortised over S = {s}, {ahead_text(cache['seconds'] / s, base)}" for s in s_list))
    out.append(f"The distilled students (mean) are ahead of the students alone (mean): {ahead_clauses(paired)}.")
    if other:
        # The members are the student alone on a longer schedule: the other way to spend more time.
        out.append(f"\nAgainst the student alone on the members' schedule ({', '.join(r['name'] for r in other)}, "
                   f"mean; their times as measured) the distilled students are ahead: {ahead_clauses(other)}. "
                   f"That schedule ends at {statistics.mean(r['final'] for r in other):.4f} after "
                   f"{statistics.mean(r['train_seconds'] for r in other):.0f} s.")
    sift_seed = a.sift_seed or seeds[0]
    live = os.path.join(a.runs, f"live-s{sift_seed}")
    # sift-s<N>/: beta 2; sift-b<B>-s<N>/: beta B (jobs/lift.sh, SIFT_BETAS).
    sifts = sorted(d for d in glob.glob(os.path.join(a.runs, f"sift-s{sift_seed}")) +
                   glob.glob(os.path.join(a.runs, f"sift-b*-s{sift_seed}")) if os.path.isdir(d))
    if os.path.isdir(live) and sifts:
        try:
            lv, svs = load_run(live), [load_run(d) for d in sifts]
        except InputError as e:
            print(f"lift.py: {e}", file=sys.stderr)
            return 2
        def beta(r):
            m = re.match(r"sift-b([\d.]+)-s", r["name"])
            return m.group(1) if m else "2"
        out.append("\n### (c) Sifting the live teacher's samples (sift.scope = \"teacher\")\n")
        out.append("| run | beta | test top-1 | training time (s) | teacher forward passes |")
        out.append("|---|---|---|---|---|")
        for r in [lv] + svs:
            out.append(f"| {r['name']} | {'-' if r is lv else beta(r)} | {r['final']:.4f} | "
                       f"{r['train_seconds']:.0f} | {r['teacher_forwards']} |")
        out.append("")
        for sv in svs:
            out.append(f"Sifting{'' if sv['name'] == f'sift-s{sift_seed}' else ' (beta ' + beta(sv) + ')'}: "
                       f"wall time {100 * (sv['train_seconds'] / lv['train_seconds'] - 1):+.1f} %, test top-1 "
                       f"{pts(sv['final'] - lv['final'])} points.")
    text = "\n".join(out) + "\n"
    print(text)
    if a.out:
        with open(a.out, "w") as fh:
            fh.write(text)
    if a.figure:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, ax = plt.subplots(figsize=(7, 4.2))
        for r in paired:
            ax.plot([t / 60 for t, _, _ in r["evals"]], [v for _, v, _ in r["evals"]], color="tab:gray",
                    lw=1, label="student alone" if r is paired[0] else None)
        for r in other:
            ax.plot([t / 60 for t, _, _ in r["evals"]], [v for _, v, _ in r["evals"]], ":", color="tab:gray",
                    lw=1, label=f"student alone, {r['epochs']} epochs (members)" if r is other[0] else None)
        for r in kd:
            for s, style in ((None, "-"), (students, "--")):
                off = 0.0 if s is None else cache["seconds"] / s
                ax.plot([(t + off) / 60 for t, _, _ in r["evals"]], [v for _, v, _ in r["evals"]],
                        style, color="tab:blue", lw=1.2,
                        label=(("distilled, cache pass not counted" if s is None else
                                f"distilled, cache pass / {s} students") if r is kd[0] else None))
        if cache["teacher_top1"] is not None:
            ax.axhline(cache["teacher_top1"], color="tab:red", lw=0.8, ls=":", label="teacher (ensemble)")
        ax.set_xlabel("training wall time (min)")
        ax.set_ylabel("test top-1")
        ax.set_ylim(0.80, max(0.94, (cache["teacher_top1"] or 0) + 0.005))
        ax.grid(alpha=0.3)
        ax.legend(loc="lower right", fontsize=8)
        fig.tight_layout()
        fig.savefig(a.figure, dpi=110)
    return 0


if __name__ == "__main__":
    sys.exit(main())
