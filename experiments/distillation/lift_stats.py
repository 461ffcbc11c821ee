"""The statistics and the time base of experiments/distillation/lift.py: paired differences with a t
interval and McNemar's test, the median step time of a run, the teacher cache's log,
and the test top-1 reached within a budget of training time.
"""

import json
import math
import os
import re
import statistics


class InputError(Exception):
    """A result.json or cache log that is missing or malformed."""


def t_quantile_975(df):
    """The 97.5 % quantile of Student's t with df degrees of freedom."""
    try:
        from scipy import stats
        return float(stats.t.ppf(0.975, df))
    except ImportError:
        table = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262}
        return table.get(df, 1.96 + 2.5 / df)


def paired_ci(diffs):
    """Mean of paired differences and its 95 % t interval (None without 2 pairs)."""
    m = statistics.mean(diffs)
    if len(diffs) < 2:
        return m, None
    half = t_quantile_975(len(diffs) - 1) * statistics.stdev(diffs) / len(diffs) ** 0.5
    return m, (m - half, m + half)


def mcnemar(a, b):
    """Exact two-sided McNemar test of two runs' test predictions: (only a right, only b right, p)."""
    (la, pa), (lb, pb) = a, b
    if la != lb:
        raise InputError("mismatched test sets: the runs' test_predictions.json hold other labels")
    only_a = sum(1 for y, x, z in zip(la, pa, pb) if x == y and z != y)
    only_b = sum(1 for y, x, z in zip(la, pa, pb) if x != y and z == y)
    n, k = only_a + only_b, min(only_a, only_b)
    p = 1.0 if n == 0 else min(1.0, 2 * sum(math.comb(n, i) for i in range(k + 1)) / 2 ** n)
    return only_a, only_b, p


def paired(x_by_seed, y_by_seed, seeds):
    """Runs X and Y paired by seed: per seed (seed, y, x, X - Y in test top-1, X/Y - 1 in training time,
    McNemar's (only Y right, only X right, p) or None), and the means with their 95 % t intervals
    ({"top1": (mean, ci), "time": (mean, ci)}). One rule for lift.py and experiments/distillation/compare_table.py."""
    rows = []
    for s in seeds:
        x, y = x_by_seed[s], y_by_seed[s]
        mc = mcnemar(y["predictions"], x["predictions"]) if x["predictions"] and y["predictions"] else None
        rows.append((s, y, x, x["final"] - y["final"], x["train_seconds"] / y["train_seconds"] - 1, mc))
    return rows, {"top1": paired_ci([r[3] for r in rows]), "time": paired_ci([r[4] for r in rows])}


def interval(ci, fmt):
    return f"[{fmt(ci[0])}, {fmt(ci[1])}]" if ci else "not defined with one seed"


def percent(x):
    return f"{100 * x:+.1f} %"


def paired_section(kd, alone_by_seed, seeds):
    """(a') the paired differences, distilled minus alone at each seed, their 95 % interval and
    McNemar's test per seed when both runs wrote test predictions; the training time too."""
    out = ["### (a') Paired by seed: distilled minus alone, test top-1\n",
           "| seed | alone | distilled | difference (points) | only alone right | only distilled right | McNemar p "
           "| training time, distilled/alone - 1 |",
           "|---|---|---|---|---|---|---|---|"]
    rows, means = paired(dict(zip(seeds, kd)), alone_by_seed, seeds)
    for s, a, k, d, dt, mc in rows:
        mc = ("-", "-", "-") if mc is None else (str(mc[0]), str(mc[1]), f"{mc[2]:.3g}" if mc[2] > 0 else "< 1e-300")
        out.append(f"| {s} | {a['final']:.4f} | {k['final']:.4f} | {pts(d)} | {mc[0]} | {mc[1]} | {mc[2]} | {percent(dt)} |")
    (m, ci), (mt, cit) = means["top1"], means["time"]
    out.append("")
    out.append(f"Mean paired difference {pts(m)} points over {len(rows)} seeds; 95 % interval " +
               (f"[{pts(ci[0])}, {pts(ci[1])}] points (t, {len(rows) - 1} degrees of freedom)."
                if ci else "not defined with one seed."))
    out.append(f"Training time (without evaluation), distilled/alone - 1: mean {percent(mt)}; 95 % interval "
               f"{interval(cit, percent)}.")
    out.append("")
    return out


KEPT_TIMING = "timing-summary.json"  # a kept run's step time (experiments/distillation/keep_run.py) when timing.h5 is not kept


def median_step_ms(path):
    """Median over steps of the slowest rank's step wall time in a timing log (ms); for a run kept
    without its timing log (experiments/distillation/keep_run.py), the figure it recorded beside result.json."""
    kept = os.path.join(os.path.dirname(path), KEPT_TIMING)
    if not os.path.exists(path) and os.path.exists(kept):
        try:
            with open(kept) as fh:
                return float(json.load(fh)["median_step_ms"])
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise InputError(f"{kept}: {e}")
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
