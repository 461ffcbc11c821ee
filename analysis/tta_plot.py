#!/usr/bin/env python3
"""Time-to-accuracy curves of several runs, side by side.

    /usr/bin/python3 analysis/tta_plot.py RESULT.json [RESULT.json ...] \\
        [--labels vitkd,pytorch] [--out tta.png]

Each RESULT.json is a result.json of `vitkd train` or of
benchmarks/pytorch_baseline.py --eval-every-epoch: its `evaluations` (step,
epoch, samples_seen, train_seconds, elapsed_seconds, test_top1) and
`time_to_accuracy` (per threshold the first evaluation at or above it).
Draws test top-1 against training wall time (evaluations excluded) and
against samples seen, one curve per run, into --out (PNG), and prints a
markdown table: per threshold, each run's training time and samples seen
until it first reached it ("-" when it did not).

Exit status: 0, or 2 when a file is missing, is not JSON or has no
`evaluations` (one line on stderr naming the file).
"""
import argparse
import json
import os
import sys


class InputError(Exception):
    """A RESULT.json that is missing, not JSON or without evaluations."""


def load(path):
    try:
        with open(path) as fh:
            r = json.load(fh)
    except (OSError, ValueError) as e:
        raise InputError(f"{path}: {e}")
    if not isinstance(r, dict) or not isinstance(r.get("evaluations"), list):
        raise InputError(f"{path}: no 'evaluations' list (a result.json of vitkd before "
                         f"train.eval_every_steps, or of pytorch_baseline.py without "
                         f"--eval-every-epoch)")
    return r


def thresholds_of(results):
    """The thresholds of every run's time_to_accuracy, in order of first appearance."""
    seen = []
    for r in results:
        for t in r.get("time_to_accuracy") or []:
            if t.get("threshold") not in seen:
                seen.append(t.get("threshold"))
    return seen


def first_reaching(result, threshold):
    """The run's time_to_accuracy entry for `threshold`, or one computed from
    its evaluations when it has none for it."""
    for t in result.get("time_to_accuracy") or []:
        if t.get("threshold") == threshold:
            return t if t.get("reached") else None
    return next((e for e in result["evaluations"] if e["test_top1"] >= threshold), None)


def table(results, labels):
    head = ["threshold"]
    for lb in labels:
        head += [f"{lb} train time", f"{lb} elapsed", f"{lb} samples"]
    rows = []
    for th in thresholds_of(results):
        row = [f"{th:.4f}"]
        for r in results:
            e = first_reaching(r, th)
            row += ([f"{e['train_seconds']:.1f} s", f"{e['elapsed_seconds']:.1f} s",
                     f"{e['samples_seen']:,}"] if e else ["-", "-", "-"])
        rows.append(row)
    last = ["final top-1"]
    for r in results:
        ev = r["evaluations"]
        last += [f"{ev[-1]['test_top1']:.4f}" if ev else "-",
                 f"{len(ev)} eval(s)", f"{ev[-1]['samples_seen']:,}" if ev else "-"]
    rows.append(last)
    out = ["| " + " | ".join(head) + " |", "|---" + "|---:" * (len(head) - 1) + "|"]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return out


def plot(results, labels, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5), sharey=True)
    for r, lb in zip(results, labels):
        ev = r["evaluations"]
        top = [e["test_top1"] for e in ev]
        axes[0].plot([e["train_seconds"] for e in ev], top, marker="o", ms=3, label=lb)
        axes[1].plot([e["samples_seen"] for e in ev], top, marker="o", ms=3, label=lb)
    for th in thresholds_of(results):
        for ax in axes:
            ax.axhline(th, color="grey", lw=0.6, ls=":")
    axes[0].set_xlabel("training wall time, evaluations excluded (s)")
    axes[1].set_xlabel("samples seen")
    axes[0].set_ylabel("test top-1")
    for ax in axes:
        ax.set_xlim(left=0)
        ax.grid(alpha=0.3)
        ax.legend(loc="lower right")
    axes[0].set_title("test top-1 vs training time")
    axes[1].set_title("test top-1 vs samples seen")
    fig.tight_layout()
    d = os.path.dirname(os.path.abspath(path))
    os.makedirs(d, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("results", nargs="+", metavar="RESULT.json")
    ap.add_argument("--labels", default="", help="comma-separated, one per RESULT.json "
                                                 "(default: the names of their folders)")
    ap.add_argument("--out", default="tta.png", help="the PNG to write")
    args = ap.parse_args(argv)
    labels = ([s.strip() for s in args.labels.split(",")] if args.labels else
              [os.path.basename(os.path.dirname(os.path.abspath(p))) for p in args.results])
    if len(labels) != len(args.results):
        ap.error(f"--labels names {len(labels)} runs, {len(args.results)} RESULT.json given")
    try:
        results = [load(p) for p in args.results]
    except InputError as e:
        print(f"tta_plot.py: error: {e}", file=sys.stderr)
        return 2
    plot(results, labels, args.out)
    print("\n".join(table(results, labels)))
    print(f"\nwrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
