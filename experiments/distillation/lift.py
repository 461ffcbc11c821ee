#!/usr/bin/env python3
"""The lift of distillation over the student trained alone: equal epochs, equal wall time, sifting.

    /usr/bin/python3 experiments/distillation/lift.py --runs RUNS [--seeds "2 3"] [--sift-seed 2] \\
        [--cache-log RUNS/cache.log | --live] [--epochs-may-differ] [--out lift.md] [--figure lift.png]

--live: the teacher ran live (no cache.log; its forward passes are in the
distilled students' times, nothing is charged). --epochs-may-differ: the
students alone are compared on purpose at another schedule (the arm "student
alone at 64 epochs" against 32-epoch distilled students).

RUNS is the folder experiments/distillation/lift.sh writes: member-s<N>/ (the ensemble's members:
the student recipe trained alone), alone-s<N>/ (the student alone at the
compared seeds), distill-s<N>/ (the student distilled from the teacher-view
cache) and cache.log (the log of `vitkd teacher-cache`). Each run folder holds
the result.json of `vitkd train`: `test_top1`, `epochs`, `steps`, `seed`,
`config` (the recipe), `eval_split` and `evaluations` (per evaluation `step`,
`epoch`, `train_seconds`, `test_top1` or `val_top1`), and, when written
(vitkd 0.4.6 on), test_predictions.json.

One time base everywhere: training time without evaluation, the
`train_seconds` of each evaluation (the last one's for a run's end; the
top-level `train_seconds` of result.json, which includes the evaluations, is
not used).

The runs compared must be comparable, or lift.py prints one line naming the
first mismatch and no table (exit 2): the seed each run recorded is the one
its folder names; alone-s<N> exists for every distilled seed N, or for none;
the distilled students and the students alone at their seeds have the same
epochs; all runs evaluated the same split; and their recipes (result.json's
`config`, or checkpoint.h5's) agree on every key but those that make an arm
(ARM_KEYS: run.mode/out_dir/seed, teacher.*, distill.*, sift.*,
checkpoint.*, model.dist_token, train.label_smoothing, train.epochs), but
precision.compute, which may differ between seeds and is the same within
each seed (SEED_KEYS: the differences are paired within a seed).

Every run of the student recipe without a teacher counts as "student alone":
the members and alone-s<N>, except members trained for another number of
epochs than the distilled students (listed apart). Written to --out (markdown) and printed:

(a) equal epochs: each run's final test top-1; the lift is the mean of the
    distilled students minus the mean of the students alone, in points;
(a') with alone-s<N> for every seed: per seed the difference in points, its
    mean with a 95 % t interval over the seeds, and, when both runs wrote
    test_predictions.json, McNemar's exact test of their test predictions;
(b) equal wall time: at budgets of training time, the mean test top-1 of the
    last evaluation each run had reached by then, the distilled students
    charged their cache's one-off teacher pass amortised over S students
    (S = 1, the students this folder holds, and 10: an extrapolation, only
    the students this folder holds were run), and from which budget on
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

from lift_stats import (InputError, ahead_from, load_cache_log, longest_ahead, mean_at,
                        median_step_ms, paired, paired_section, pts)


def load_run(folder):
    """One run folder. Its training time ("train_seconds") is the last evaluation's train_seconds:
    training time without any evaluation, the time base of the curves too (result.json's top-level
    train_seconds includes the evaluations and is not used)."""
    path = os.path.join(folder, "result.json")
    try:
        with open(path) as fh:
            r = json.load(fh)
        split = r.get("eval_split", "test")  # result.json without the key: evaluated on test (before 0.4.6)
        evals = [(float(e["train_seconds"]), float(e[f"{split}_top1"]), int(e["epoch"])) for e in r["evaluations"]]
        final = float(r["test_top1"])
        epochs = int(r["epochs"])
        last_step = int(r["evaluations"][-1]["step"]) if r["evaluations"] else -1
        steps = int(r["steps"])
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise InputError(f"{path}: {e}")
    if not evals or final < 0:
        raise InputError(f"{path}: no evaluations (was train.final_eval off?)")
    if last_step != steps:
        raise InputError(f"{path}: the last evaluation is at step {last_step}, not at the end ({steps}); "
                         "lift.py needs train.final_eval = true")
    return {"name": os.path.basename(folder), "final": final, "train_seconds": evals[-1][0], "evals": evals,
            "epochs": epochs, "split": split, "seed": r.get("seed"), "recipe": recipe_of(folder, r),
            "step_ms": median_step_ms(os.path.join(folder, "timing.h5")),
            "teacher_forwards": r.get("teacher_forwards"),
            "cache_read_s": r.get("teacher_cache_read_seconds"),
            "agreement": r.get("teacher_agreement"), "teacher_top1": r.get("teacher_test_top1"),
            "predictions": load_predictions(folder)}


# The keys that make an arm what it is (or only name where it writes): every other key of the
# recipe must be the same in the runs compared.
ARM_KEYS = ("run.mode", "run.out_dir", "run.seed", "teacher.", "distill.", "sift.", "checkpoint.",
            "model.dist_token", "train.label_smoothing", "train.epochs")
# The keys a seed may set for all of its runs, differing between seeds but never within one: the
# precision a seed's first run picked (experiments/learning-log.md, 2026-12-03, fourth session). The
# differences are paired within a seed.
SEED_KEYS = ("precision.compute",)
# Keys added to the configuration after some runs were kept, whose value does not change what a run
# computes: compared only where both recipes record them. precision.gather (0.4.7): the bf16 compute
# weights are bitwise autocast's casts whichever precision gathers them (docs/precision.md).
LATER_KEYS = ("precision.gather",)


def recipe_of(folder, r):
    """The run's effective configuration as {"section.key": value}, from result.json's config (since
    0.4.6) or checkpoint.h5's config attribute; None when neither is there."""
    text = r.get("config")
    if text is None:
        try:
            import h5py
            with h5py.File(os.path.join(folder, "checkpoint.h5"), "r") as f:
                text = f.attrs["config"]
                text = text.decode() if isinstance(text, bytes) else str(text)
        except (OSError, KeyError, ImportError):
            return None
    import tomllib
    try:
        toml = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise InputError(f"{folder}: its recorded configuration is not TOML: {e}")
    return {f"{sec}.{k}": v for sec, keys in toml.items() if isinstance(keys, dict) for k, v in keys.items()}


def load_predictions(folder):
    """test_predictions.json (vitkd train since 0.4.6): per test sample, the label and the prediction."""
    path = os.path.join(folder, "test_predictions.json")
    if not os.path.exists(path):
        return None
    try:
        with open(path) as fh:
            p = json.load(fh)
        labels, preds = [int(v) for v in p["labels"]], [int(v) for v in p["predictions"]]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise InputError(f"{path}: {e}")
    if len(labels) != len(preds) or not labels:
        raise InputError(f"{path}: {len(labels)} labels against {len(preds)} predictions")
    return labels, preds


def check_comparable(groups):
    """One line naming the first mismatch among the runs compared: `groups` maps a description to
    runs that must share epochs (and each seed its folder's name), and every run must share the
    recipe outside ARM_KEYS and the evaluated split."""
    runs = [r for rs in groups.values() for r in rs]
    for r in runs:
        m = re.search(r"-s(\d+)$", r["name"])
        if m and r["seed"] is not None and int(r["seed"]) != int(m.group(1)):
            raise InputError(f"mismatched seeds: {r['name']} was trained with run.seed = {r['seed']}")
    for what, rs in groups.items():
        if len({r["epochs"] for r in rs}) > 1:
            raise InputError(f"mismatched epochs among the {what}: " +
                             ", ".join(f"{r['name']} {r['epochs']}" for r in rs))
    if len({r["split"] for r in runs}) > 1:
        raise InputError("mismatched evaluation splits: " + ", ".join(f"{r['name']} {r['split']}" for r in runs))
    if any(r["recipe"] is None for r in runs):
        raise InputError("no recorded recipe (result.json config or checkpoint.h5) for " +
                         ", ".join(r["name"] for r in runs if r["recipe"] is None) + "; the runs cannot be checked")
    def shared(rec, skip):
        return {k: v for k, v in rec.items() if not k.startswith(skip)}

    def first_mismatch(rs, skip):
        base = rs[0]
        for r in rs[1:]:
            a, b = shared(base["recipe"], skip), shared(r["recipe"], skip)
            diff = sorted(k for k in a.keys() | b.keys() if a.get(k) != b.get(k)
                          and not (k in LATER_KEYS and (k not in a or k not in b)))
            if diff:
                k = diff[0]
                raise InputError(f"mismatched recipes: {k} = {a.get(k)!r} in {base['name']}, {b.get(k)!r} in "
                                 f"{r['name']}" + (f" (and {len(diff) - 1} more keys)" if len(diff) > 1 else ""))
    first_mismatch(runs, ARM_KEYS + SEED_KEYS)
    by_seed = {}
    for r in runs:
        by_seed.setdefault(r["seed"], []).append(r)
    for rs in by_seed.values():
        first_mismatch(rs, ARM_KEYS)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", required=True)
    ap.add_argument("--seeds", default="2 3", help="seeds of the distilled students (and alone-s<N>)")
    ap.add_argument("--cache-log", default=None, help="default RUNS/cache.log")
    ap.add_argument("--live", action="store_true",
                    help="the teacher ran live (no cache.log): its forward passes are in the training times")
    ap.add_argument("--epochs-may-differ", action="store_true",
                    help="the students alone may have another schedule (e.g. 64 epochs against 32)")
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
        alone = [r for r in runs_alone if r["epochs"] == epochs or a.epochs_may_differ]
        other = [r for r in runs_alone if r["epochs"] != epochs and r["name"].startswith("member-")
                 and not a.epochs_may_differ]
        if not alone:
            raise InputError(f"{a.runs}: no member-s*/ or alone-s*/ run of {epochs} epochs (the students alone)")
        # The same seeds as the distilled students, when run: the paired baseline, and the
        # only one used for times (the members may have run on a busier machine).
        by_seed = {r["name"][len("alone-s"):]: r for r in runs_alone if r["name"].startswith("alone-s")}
        if by_seed and set(by_seed) != set(seeds):
            raise InputError("mismatched seeds: distilled at " + ", ".join(seeds) + ", alone at " +
                             ", ".join(sorted(by_seed)) + " (paired differences need alone-s<N> for every seed)")
        paired = [by_seed[s] for s in seeds] if by_seed else alone
        groups = ({"distilled students": kd, "students alone": paired} if a.epochs_may_differ else
                  {"distilled students and the students alone they are compared with": kd + paired})
        groups["runs of the teacher's members' schedule"] = other or kd
        check_comparable(groups)
        cache = None if a.live else load_cache_log(a.cache_log or os.path.join(a.runs, "cache.log"))
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
    if cache and cache["teacher_top1"] is not None:
        out.append(f"The teacher (the cache's) has test top-1 {cache['teacher_top1']:.4f}: "
                   f"{pts(cache['teacher_top1'] - m_paired)} points over the students alone at the same seeds, "
                   f"{pts(cache['teacher_top1'] - m_alone)} over all of them.")
    step_kd = statistics.median(r["step_ms"] for r in kd)
    step_alone = statistics.median(r["step_ms"] for r in paired)
    out.append(f"Median step (median over the runs of each kind; alone: {', '.join(r['name'] for r in paired)}): "
               f"distilled{'' if cache is None else ' from the cache'} {step_kd:.1f} ms, alone {step_alone:.1f} ms "
               f"({100 * (step_kd / step_alone - 1):+.1f} %).")
    out.append("")
    if by_seed:
        try:
            out += paired_section(kd, by_seed, seeds)
        except InputError as e:
            print(f"lift.py: {e}", file=sys.stderr)
            return 2

    students = len(kd)
    split = kd[0]["split"]
    out.append(f"### (b) Equal wall time: mean {split} top-1 reached within a budget of training time "
               "(evaluations not counted)\n")
    if cache is None:
        out.append("The teacher ran live: its forward passes are in the distilled students' training times.\n")
    else:
        out.append(f"The cache's one-off teacher pass took {cache['seconds']:.0f} s ({cache['forwards']} teacher "
                   f"forward passes, {cache['mb']:.0f} MB); a distilled student is charged it divided by the "
                   f"number of students S that replay the cache.\n")
    out.append(f"Students alone in this part: {', '.join(r['name'] for r in paired)}.\n")
    alone_times = sorted({t for r in paired for t, _, _ in r["evals"]})
    shown = [alone_times[i] for i in sorted({0, len(alone_times) // 8, len(alone_times) // 4,
                                             len(alone_times) // 2, 3 * len(alone_times) // 4,
                                             len(alone_times) - 1})]
    s_list = [] if cache is None else sorted({1, students, 10})
    shown += [max(r["train_seconds"] for r in kd) + cache["seconds"] / s for s in reversed(s_list)]
    shown = sorted({round(b) for b in shown if mean_at(paired, b) is not None})
    out.append("| budget (s) | alone | " + ("distilled, teacher live |" if cache is None else " | ".join(
        f"distilled, S = {s}" + ("" if s <= students else " (extrapolated)") for s in s_list) + " |"))
    out.append("|---|---|" + "---|" * max(1, len(s_list)))
    fmt = lambda v: "-" if v is None else f"{v:.4f}"
    for b in shown:
        out.append(f"| {b:.0f} | {fmt(mean_at(paired, b))} | " +
                   (fmt(mean_at(kd, b)) if cache is None else
                    " | ".join(fmt(mean_at(kd, b, cache['seconds'] / s)) for s in s_list)) + " |")
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
        if cache is None:
            return f"with the live teacher's forward passes counted, {ahead_text(0.0, base)}"
        return (f"with the cache's pass not counted, {ahead_text(0.0, base)}; " +
                "; ".join(f"amortised over S = {s}{' (extrapolated)' if s > students else ''}, "
                          f"{ahead_text(cache['seconds'] / s, base)}" for s in s_list))
    out.append(f"The distilled students (mean) are ahead of the students alone (mean): {ahead_clauses(paired)}.")
    if other:
        # The members are the student alone on a longer schedule: the other way to spend more time.
        out.append(f"\nAgainst the student alone on the members' schedule ({', '.join(r['name'] for r in other)}, "
                   f"mean; their times as measured) the distilled students are ahead: {ahead_clauses(other)}. "
                   f"That schedule ends at {statistics.mean(r['final'] for r in other):.4f} after "
                   f"{statistics.mean(r['train_seconds'] for r in other):.0f} s.")
    sift_seed = a.sift_seed or seeds[0]
    live = os.path.join(a.runs, f"live-s{sift_seed}")
    # sift-s<N>/: beta 2; sift-b<B>-s<N>/: beta B (experiments/distillation/lift.sh, SIFT_BETAS).
    sifts = sorted(d for d in glob.glob(os.path.join(a.runs, f"sift-s{sift_seed}")) +
                   glob.glob(os.path.join(a.runs, f"sift-b*-s{sift_seed}")) if os.path.isdir(d))
    if os.path.isdir(live) and sifts:
        try:
            lv, svs = load_run(live), [load_run(d) for d in sifts]
            check_comparable({"sifting runs and the live teacher's run": [lv] + svs})
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
            for s, style in ((None, "-"),) + (() if cache is None else ((students, "--"),)):
                off = 0.0 if s is None else cache["seconds"] / s
                ax.plot([(t + off) / 60 for t, _, _ in r["evals"]], [v for _, v, _ in r["evals"]],
                        style, color="tab:blue", lw=1.2,
                        label=(("distilled" + ("" if cache is None else ", cache pass not counted") if s is None else
                                f"distilled, cache pass / {s} students") if r is kd[0] else None))
        if cache and cache["teacher_top1"] is not None:
            ax.axhline(cache["teacher_top1"], color="tab:red", lw=0.8, ls=":", label="teacher (ensemble)")
        ax.set_xlabel("training wall time without evaluation (min)")
        ax.set_ylabel(f"{kd[0]['split']} top-1")
        ax.set_ylim(0.80, max(0.94, ((cache or {}).get("teacher_top1") or 0) + 0.005))
        ax.grid(alpha=0.3)
        ax.legend(loc="lower right", fontsize=8)
        fig.tight_layout()
        fig.savefig(a.figure, dpi=110)
    return 0


if __name__ == "__main__":
    sys.exit(main())
