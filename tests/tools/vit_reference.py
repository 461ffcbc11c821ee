"""Checks the C++ ViT against analysis/vitkd_model.py (PyTorch) on the same
weights: runs vit_dump (tests/tools/vit_dump.cpp), loads the checkpoint it
wrote, runs the same input, and compares both heads' logits.

    vit_reference.py VIT_DUMP OUT_DIR
"""
import os
import shutil
import subprocess
import sys

# Skipped (exit 77, CTest's SKIP_RETURN_CODE) without the modules it checks with.
try:
    import h5py
    import torch
except ImportError as e:
    print(f"SKIP: {sys.executable} lacks {e.name} (Debian: python3-<module>; Spack: py-<module>)")
    sys.exit(77)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "analysis"))
import vitkd_model  # noqa: E402

vit_dump, d = sys.argv[1], sys.argv[2]
shutil.rmtree(d, ignore_errors=True)
os.makedirs(d)
subprocess.run([vit_dump, d], check=True)
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
