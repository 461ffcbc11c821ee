#!/usr/bin/env python3
"""A teacher of another kind: a small ResNet-style convnet for a vitkd dataset file.

    nice -n 19 /usr/bin/python3 experiments/distillation/teacher_cnn.py --data data/fmnist-val.h5 \\
        --out teachers/fmnist-cnn.pt --json experiments/distillation/results/teacher-cnn-fmnist.json [--epochs 12] [--seed 1]

Trains on /train of a file written by `vitkd prepare ... --val-fraction F`,
chooses the epoch to keep by its top-1 on /val (the only choice made here; the
test split is read once, by the model kept), and saves that model with
torch.jit.save(torch.jit.script(model)) for vitkd's `teacher.torchscript`:
normalized float [N, C, H, W] in, logits [N, K] out, normalized as vitkd
normalizes (pixel / 255 - mean[c]) / std[c] with the file's mean and std
attributes (src/data/transforms). Training views: vitkd's "pad" augmentation
(a shift of up to 2 pixels with zero padding, and a horizontal flip).

The JSON (--json) records the model, the schedule, the val top-1 after every
epoch, the epoch kept, its val and test top-1, seconds per epoch and the
versions. Needs Debian's python3-torch, python3-h5py and python3-numpy (no
PyPI). Exit status 2 with one line on stderr when the file lacks a split or
an attribute.
"""
import argparse
import json
import math
import os
import platform
import sys
import time

import h5py
import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from keep_run import cpu_model  # noqa: E402  (the CPU as every kept run records it)
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    """ResNet's basic block: two 3x3 convolutions with batch norm, a projection when the shape changes."""

    def __init__(self, cin, cout, stride):
        super().__init__()
        self.c1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.b1 = nn.BatchNorm2d(cout)
        self.c2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.b2 = nn.BatchNorm2d(cout)
        self.proj = nn.Sequential()
        if stride != 1 or cin != cout:
            self.proj = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        y = F.relu(self.b1(self.c1(x)))
        return F.relu(self.b2(self.c2(y)) + self.proj(x))


class ConvNet(nn.Module):
    """Stem 3x3 conv at full resolution, then one block per stage at widths w, 2w, 4w (stride 1, 2, 2),
    global average pooling and a linear head."""

    def __init__(self, channels, classes, width):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(channels, width, 3, 1, 1, bias=False), nn.BatchNorm2d(width), nn.ReLU())
        self.stages = nn.Sequential(Block(width, width, 2), Block(width, 2 * width, 1),
                                    Block(2 * width, 4 * width, 2))
        self.head = nn.Linear(4 * width, classes)

    def forward(self, x):
        x = self.stages(self.stem(x))
        return self.head(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


def fail(msg):
    print(f"teacher_cnn.py: {msg}", file=sys.stderr)
    sys.exit(2)


def load(path):
    """The splits as normalized float tensors [N, C, H, W] and int64 labels, and the file's attributes."""
    try:
        f = h5py.File(path, "r")
    except OSError as e:
        fail(f"cannot open {path}: {e}; make it with `vitkd prepare fashion-mnist --out {path} --val-fraction 0.1`")
    with f:
        for k in ("mean", "std", "class_names"):
            if k not in f.attrs:
                fail(f"{path}: no attribute /{k}; not a vitkd dataset file (vitkd prepare writes one)")
        if "val" not in f:
            fail(f"{path} has no /val split; write one with `vitkd prepare ... --val-fraction 0.1` "
                 "(the epoch kept is chosen on it)")
        mean = np.asarray(f.attrs["mean"], dtype=np.float64)
        std = np.asarray(f.attrs["std"], dtype=np.float64)
        out = {}
        for s in ("train", "val", "test"):
            img = np.asarray(f[s]["images"])  # uint8 [N, H, W, C]
            x = (img.astype(np.float32) / 255.0 - mean.astype(np.float32)) / std.astype(np.float32)
            out[s] = (torch.from_numpy(np.ascontiguousarray(x.transpose(0, 3, 1, 2))),
                      torch.from_numpy(np.asarray(f[s]["labels"]).astype(np.int64)))
        attrs = {"mean": mean.tolist(), "std": std.tolist(), "classes": len(f.attrs["class_names"]),
                 "val_fraction": float(f.attrs.get("val_fraction", float("nan"))),
                 "val_seed": int(f.attrs.get("val_seed", -1))}
    return out, attrs


def augment(x, g, pad=2):
    """vitkd's "pad" views: a shift of up to `pad` pixels with zero padding (x here is shifted so that a 0
    pixel is 0) and a horizontal flip, each drawn per sample from generator g."""
    n, c, h, w = x.shape
    xp = F.pad(x, (pad, pad, pad, pad), value=0.0)
    dy = torch.randint(0, 2 * pad + 1, (n,), generator=g)
    dx = torch.randint(0, 2 * pad + 1, (n,), generator=g)
    flip = torch.rand(n, generator=g) < 0.5
    rows = dy[:, None] + torch.arange(h)[None, :]                      # [n, h]
    cols = torch.arange(w)[None, :].expand(n, w)
    cols = torch.where(flip[:, None], cols.flip(-1), cols) + dx[:, None]  # [n, w], flipped where drawn
    i = torch.arange(n)[:, None, None]
    return xp.permute(0, 2, 3, 1)[i, rows[:, :, None], cols[:, None, :]].permute(0, 3, 1, 2).contiguous()


def top1(model, x, y, batch=1000):
    model.eval()
    correct = 0
    with torch.no_grad():
        for i in range(0, len(y), batch):
            correct += int((model(x[i:i + batch]).argmax(-1) == y[i:i + batch]).sum())
    return correct / len(y)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", required=True)
    ap.add_argument("--out", required=True, help="the TorchScript file to write")
    ap.add_argument("--json", required=True, help="the record to write")
    ap.add_argument("--epochs", type=int, default=12)
    ap.add_argument("--width", type=int, default=32, help="channels of the first stage (at least 8)")
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--lr", type=float, default=0.1, help="peak SGD learning rate (one-cycle: warm-up, cosine)")
    ap.add_argument("--weight-decay", type=float, default=5e-4)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--limit", type=int, default=0, help="train on the first N samples only (smoke tests)")
    a = ap.parse_args()
    if a.width < 8:
        # Seen 2026-12-03 on an AVX2-only AMD EPYC, Debian's PyTorch 1.13 (its system oneDNN): at
        # width 4 a JIT convolution kernel writes out of bounds during the backward pass (valgrind),
        # and the process dies in dnnl_memory_destroy. Widths 8, 16 and 32 ran clean there.
        fail(f"--width {a.width}: use 8 or more (oneDNN's CPU kernels in PyTorch 1.13 corrupt memory "
             "at 4 channels on AVX2 CPUs)")
    torch.manual_seed(a.seed)
    torch.set_num_threads(a.threads)
    data, attrs = load(a.data)
    xt, yt = data["train"]
    if a.limit:
        xt, yt = xt[:a.limit], yt[:a.limit]
    if int(yt.max()) >= attrs["classes"]:
        fail(f"{a.data}: a label is outside the {attrs['classes']} classes of /class_names")
    model = ConvNet(xt.shape[1], attrs["classes"], a.width)
    # Zero padding in pixel space is (0 - mean) / std after normalization; augment() pads with 0 in
    # normalized space, so shift the input by the pixel zero before padding and back after.
    pix0 = torch.tensor([(-m / s) for m, s in zip(attrs["mean"], attrs["std"])], dtype=torch.float32).view(1, -1, 1, 1)
    params = sum(p.numel() for p in model.parameters())
    decay = [p for p in model.parameters() if p.ndim > 1]
    no_decay = [p for p in model.parameters() if p.ndim <= 1]
    opt = torch.optim.SGD([{"params": decay, "weight_decay": a.weight_decay},
                           {"params": no_decay, "weight_decay": 0.0}], lr=a.lr, momentum=0.9, nesterov=True)
    steps_per_epoch = math.ceil(len(yt) / a.batch)
    total = a.epochs * steps_per_epoch
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=a.lr, total_steps=total, pct_start=0.15,
                                                anneal_strategy="cos", div_factor=10, final_div_factor=100)
    g = torch.Generator().manual_seed(a.seed)
    curve, best, best_state, epoch_s = [], -1.0, None, []
    print(f"teacher_cnn: {params} parameters, {len(yt)} train, {len(data['val'][1])} val, "
          f"{len(data['test'][1])} test, {a.epochs} epochs of {steps_per_epoch} steps", flush=True)
    for epoch in range(a.epochs):
        t0 = time.time()
        model.train()
        perm = torch.randperm(len(yt), generator=g)
        loss_sum = 0.0
        for s in range(steps_per_epoch):
            idx = perm[s * a.batch:(s + 1) * a.batch]
            x = augment(xt[idx] - pix0, g) + pix0
            loss = F.cross_entropy(model(x), yt[idx])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            sched.step()
            loss_sum += float(loss)
        epoch_s.append(time.time() - t0)
        v = top1(model, *data["val"])
        curve.append(v)
        if v > best:
            best, best_epoch = v, epoch + 1
            best_state = {k: t.clone() for k, t in model.state_dict().items()}
        print(f"teacher_cnn: epoch {epoch + 1}/{a.epochs}: loss {loss_sum / steps_per_epoch:.4f}, "
              f"val top-1 {v:.4f}, {epoch_s[-1]:.0f} s", flush=True)
    model.load_state_dict(best_state)
    model.eval()
    test = top1(model, *data["test"])  # the one reading of the test split
    scripted = torch.jit.script(model)
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    torch.jit.save(scripted, a.out)
    reloaded = torch.jit.load(a.out)
    xv = data["val"][0][:256]
    with torch.no_grad():
        diff = float((reloaded(xv) - model(xv)).abs().max())
    if diff > 1e-4:
        fail(f"{a.out}: the reloaded TorchScript differs from the model by {diff:.2e} on val samples")
    record = {
        "what": "experiments/distillation/teacher_cnn.py: a ResNet-style convnet teacher, the epoch kept chosen on /val",
        "data": a.data, "data_attrs": attrs, "torchscript": a.out,
        "model": f"ConvNet(width={a.width}): stem conv3x3, blocks {a.width}/s2, {2 * a.width}/s1, {4 * a.width}/s2, "
                 "avgpool, linear",
        "parameters": params, "epochs": a.epochs, "batch": a.batch, "lr": a.lr, "weight_decay": a.weight_decay,
        "seed": a.seed, "threads": a.threads, "train_samples": len(yt),
        "augment": "pad 2 shift + horizontal flip (vitkd's data.crop = \"pad\")",
        "val_top1_per_epoch": curve, "epoch_kept": best_epoch, "val_top1": best, "test_top1": test,
        "epoch_seconds": epoch_s, "reloaded_max_abs_diff": diff,
        "torch": torch.__version__, "python": platform.python_version(), "machine": platform.processor() or platform.machine(),
        "cpu": cpu_model(),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
    }
    os.makedirs(os.path.dirname(os.path.abspath(a.json)), exist_ok=True)
    with open(a.json, "w") as fh:
        json.dump(record, fh, indent=1)
    print(f"teacher_cnn: kept epoch {best_epoch}: val top-1 {best:.4f}, test top-1 {test:.4f} -> {a.out}, {a.json}",
          flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
