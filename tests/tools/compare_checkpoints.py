"""Compares two vitkd checkpoints.

  compare_checkpoints.py A.h5 B.h5 [--exact] [--rtol R] [--groups model,optimizer]

--exact: every dataset in the groups must be bitwise equal (a resume at the
same rank count). Otherwise the relative L2 distance ||a-b|| / ||a|| over all
datasets of a group together must be <= rtol (a resume at another rank count,
where the reduction order differs). Per-dataset maxima would be meaningless
there: the attention key bias has an analytically zero gradient, so AdamW
turns pure rounding noise into lr-sized steps on it.
Optimizer arrays are compared over the real parameters only (the padding
differs with the rank count).
"""
import argparse
import sys

import h5py
import numpy as np

ap = argparse.ArgumentParser()
ap.add_argument("a")
ap.add_argument("b")
ap.add_argument("--exact", action="store_true")
ap.add_argument("--rtol", type=float, default=1e-5)
ap.add_argument("--groups", default="model,optimizer")
args = ap.parse_args()

worst = 0.0
sq = {}
with h5py.File(args.a, "r") as fa, h5py.File(args.b, "r") as fb:
    n = 0
    for group in args.groups.split(","):
        numel = int(fa["optimizer"].attrs["numel"]) if group == "optimizer" else None
        for name, da in fa[group].items():
            a = da[()]
            b = fb[group][name][()]
            if numel is not None:
                a, b = a[:numel], b[:numel]
            if a.shape != b.shape:
                sys.exit(f"FAIL {group}/{name}: shapes {a.shape} vs {b.shape}")
            if args.exact:
                if not np.array_equal(a.view(np.uint32), b.view(np.uint32)):
                    diff = np.abs(a.astype(np.float64) - b).max()
                    sys.exit(f"FAIL {group}/{name}: not bitwise equal (max |diff| {diff:.3g})")
            else:
                d, r = sq.get(group, (0.0, 0.0))
                sq[group] = (d + float(((a.astype(np.float64) - b) ** 2).sum()),
                             r + float((a.astype(np.float64) ** 2).sum()))
            n += 1
    for group, (d, r) in sq.items():
        rel = (d / max(r, 1e-300)) ** 0.5
        worst = max(worst, rel)
        if rel > args.rtol:
            sys.exit(f"FAIL {group}: relative L2 distance {rel:.3g} > {args.rtol}")
    for attr in ("step", "samples_seen", "samples_trained"):
        if fa.attrs[attr] != fb.attrs[attr]:
            sys.exit(f"FAIL attribute {attr}: {fa.attrs[attr]} vs {fb.attrs[attr]}")
print(f"OK: {n} datasets {'bitwise equal' if args.exact else f'within rtol {args.rtol} (worst {worst:.3g})'}")
