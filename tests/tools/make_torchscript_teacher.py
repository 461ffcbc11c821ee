"""Writes a vitkd teacher checkpoint as a TorchScript file, the way a user
with a PyTorch teacher would: build the model in PyTorch (analysis/'s twin of
vitkd's ViT), load the weights, torch.jit.script, torch.jit.save.

    make_torchscript_teacher.py CHECKPOINT.h5 OUT.pt [--classes K]

--classes K replaces the head with a K-class one (a deliberately wrong
teacher for the bad-input case). --fp32-only wraps the model in a module that
raises unless its logits are float32, i.e. one that fails under bf16 autocast
(vitkd must fall back to fp32 and say so).
"""
import argparse
import os
import sys

import h5py
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "analysis"))
import vitkd_model  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("checkpoint")
ap.add_argument("out")
ap.add_argument("--classes", type=int)
ap.add_argument("--fp32-only", action="store_true")
a = ap.parse_args()


class Fp32Only(torch.nn.Module):
    def __init__(self, inner):
        super().__init__()
        self.inner = inner

    def forward(self, x):
        y = self.inner(x)
        if y.dtype != torch.float32:
            raise RuntimeError("this teacher only runs in float32")
        return y


model = vitkd_model.load_checkpoint(a.checkpoint)
if a.classes:
    model.head = torch.nn.Linear(model.head.in_features, a.classes)
if a.fp32_only:
    model = Fp32Only(model).eval()
scripted = torch.jit.script(model)
torch.jit.save(scripted, a.out)
with h5py.File(a.checkpoint, "r") as f:
    spec = vitkd_model.spec_of(f)
x = torch.randn(3, spec["channels"], spec["image_size"], spec["image_size"])
with torch.no_grad():
    d = (torch.jit.load(a.out)(x) - model(x)).abs().max().item()
assert d <= 1e-6, f"the saved TorchScript module differs from the eager model by {d}"
print(f"wrote {a.out}: TorchScript of {a.checkpoint}"
      f"{f' with a {a.classes}-class head' if a.classes else ''}{' (fp32 only)' if a.fp32_only else ''}")
