"""Compares two vitkd checkpoints.

  compare_checkpoints.py A.h5 B.h5 [--exact] [--rtol R | --rel-l2 R]
                         [--groups model,optimizer] [--json FILE] [--no-attrs]

--exact: every dataset in the groups must be bitwise equal (a resume at the
same rank count). Otherwise the relative L2 distance ||a-b|| / ||a|| over all
datasets of a group together must be <= rtol (a resume at another rank count,
where the reduction order differs). Per-dataset maxima would be meaningless
there: the attention key bias has an analytically zero gradient, so AdamW
turns pure rounding noise into lr-sized steps on it.
Optimizer arrays are compared over the real parameters only (the padding
differs with the rank count).

--rel-l2 R is --rtol R that also prints the relative L2 distance of every
dataset (for the record; only the per-group value, over all datasets of the
group, is checked, for the reason above) and the largest |a-b|.
--json FILE writes the numbers: per group the relative L2 and max |a-b|, per
dataset the same, whether every dataset is bitwise equal, and the verdict.
--no-attrs skips the check that step, samples_seen and samples_trained agree.
"""
import argparse
import json
import sys

import h5py
import numpy as np

ap = argparse.ArgumentParser()
ap.add_argument("a")
ap.add_argument("b")
ap.add_argument("--exact", action="store_true")
ap.add_argument("--rtol", type=float, default=1e-5)
ap.add_argument("--rel-l2", type=float, default=None, metavar="TOL",
                help="same as --rtol TOL, and print every dataset's relative L2 distance")
ap.add_argument("--groups", default="model,optimizer")
ap.add_argument("--json", default="", metavar="FILE", help="write the numbers as JSON")
ap.add_argument("--no-attrs", action="store_true",
                help="do not require equal step / samples_seen / samples_trained")
args = ap.parse_args()
if args.rel_l2 is not None:
    args.rtol = args.rel_l2

report = {"a": args.a, "b": args.b, "exact": args.exact, "rtol": args.rtol,
          "groups": {}, "datasets": {}, "bitwise_equal": True, "ok": True, "message": ""}


def finish(message, ok):
    report["ok"] = ok
    report["message"] = message
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=2)
            f.write("\n")
    if ok:
        print(message)
        sys.exit(0)
    sys.exit(message)


worst = 0.0
sq = {}
with h5py.File(args.a, "r") as fa, h5py.File(args.b, "r") as fb:
    n = 0
    first_failure = None
    for group in args.groups.split(","):
        numel = int(fa["optimizer"].attrs["numel"]) if group == "optimizer" else None
        for name, da in fa[group].items():
            a = da[()]
            if name not in fb[group]:
                finish(f"FAIL {group}/{name}: missing in {args.b}", False)
            b = fb[group][name][()]
            if numel is not None:
                a, b = a[:numel], b[:numel]
            if a.shape != b.shape:
                finish(f"FAIL {group}/{name}: shapes {a.shape} vs {b.shape}", False)
            a64 = a.astype(np.float64)
            d = a64 - b
            dsq, rsq = float((d ** 2).sum()), float((a64 ** 2).sum())
            maxabs = float(np.abs(d).max()) if d.size else 0.0
            bitwise = bool(np.array_equal(a.view(np.uint32), b.view(np.uint32))) \
                if a.dtype.itemsize == 4 else bool(np.array_equal(a, b))
            report["datasets"][f"{group}/{name}"] = {
                "rel_l2": (dsq / max(rsq, 1e-300)) ** 0.5, "max_abs": maxabs, "bitwise": bitwise}
            report["bitwise_equal"] = report["bitwise_equal"] and bitwise
            g = report["groups"].setdefault(group, {"max_abs": 0.0})
            g["max_abs"] = max(g["max_abs"], maxabs)
            if args.exact:
                if not bitwise and first_failure is None:
                    first_failure = f"FAIL {group}/{name}: not bitwise equal (max |diff| {maxabs:.3g})"
            else:
                dd, rr = sq.get(group, (0.0, 0.0))
                sq[group] = (dd + dsq, rr + rsq)
                if args.rel_l2 is not None:
                    print(f"  {group}/{name}: relative L2 {report['datasets'][f'{group}/{name}']['rel_l2']:.3g}"
                          f", max |diff| {maxabs:.3g}")
            n += 1
    if first_failure:
        finish(first_failure, False)
    for group, (d, r) in sq.items():
        rel = (d / max(r, 1e-300)) ** 0.5
        report["groups"][group]["rel_l2"] = rel
        worst = max(worst, rel)
        if args.rel_l2 is not None:
            print(f"{group}: relative L2 {rel:.3g} over all datasets, "
                  f"max |diff| {report['groups'][group]['max_abs']:.3g}")
        if rel > args.rtol:
            finish(f"FAIL {group}: relative L2 distance {rel:.3g} > {args.rtol}", False)
    report["worst_rel_l2"] = worst
    if not args.no_attrs:
        for attr in ("step", "samples_seen", "samples_trained"):
            if fa.attrs[attr] != fb.attrs[attr]:
                finish(f"FAIL attribute {attr}: {fa.attrs[attr]} vs {fb.attrs[attr]}", False)
finish(f"OK: {n} datasets {'bitwise equal' if args.exact else f'within rtol {args.rtol} (worst {worst:.3g})'}",
       True)
