"""Checks the C++ ViT against analysis/vitkd_model.py (PyTorch) on the same
weights: loads the checkpoint vit_dump wrote, runs the same input, and
compares both heads' logits."""
import os
import sys

import h5py
import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "analysis"))
import vitkd_model  # noqa: E402

d = sys.argv[1]
model = vitkd_model.load_checkpoint(os.path.join(d, "checkpoint.h5"))
with h5py.File(os.path.join(d, "logits.h5"), "r") as f:
    x = torch.from_numpy(f["input"][()])
    want = {k: torch.from_numpy(f[k][()]) for k in ("logits", "dist_logits", "prediction")}
with torch.no_grad():
    cls, dist = model.forward_heads(x)
    pred = model(x)
got = {"logits": cls, "dist_logits": dist, "prediction": pred}
worst = 0.0
for k in want:
    err = (got[k] - want[k]).abs().max().item()
    worst = max(worst, err)
    print(f"{k}: max |C++ - PyTorch| = {err:.3e} (scale {want[k].abs().max().item():.3f})")
if worst > 1e-4:
    print("FAIL: the C++ ViT differs from the PyTorch ViT")
    sys.exit(1)
print("OK: C++ ViT == PyTorch ViT within 1e-4")
