#!/usr/bin/env bash
# The workflow of docs/own-data.md (own teacher, data and serving), end to end on a
# folder of generated photos-like images (coloured shapes, PNG and JPEG):
#   1. vitkd prepare folder (2 ranks)
#   2. a CNN teacher trained in PyTorch on that file, saved with torch.jit.save
#   3. vitkd distills a ViT student from the TorchScript teacher
#   4. vitkd export; the loader checks logits and writes TorchScript; the
#      served student's test accuracy is compared with vitkd's.
# Usage: bash jobs/workflow_demo.sh [WORKDIR]      (after jobs/build.sh; ~2 min on 2 cores)
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
work=${1:-$src/runs/workflow-demo}
vitkd=${VITKD:-$src/build/vitkd}
source "$src/jobs/env.sh"
rm -rf "$work" && mkdir -p "$work"

echo "== 0. a folder of images: 4 shape classes, 160 images each, PNG and JPEG"
/usr/bin/python3 - "$work/photos" <<'PY'
import os, sys
import numpy as np
from PIL import Image, ImageDraw
root, rng = sys.argv[1], np.random.default_rng(0)
for k, shape in enumerate(["circle", "cross", "square", "triangle"]):
    os.makedirs(os.path.join(root, shape))
    for i in range(160):
        w, h = int(rng.integers(56, 96)), int(rng.integers(56, 96))
        bg = tuple(int(v) for v in rng.integers(0, 120, 3))
        fg = tuple(int(v) for v in rng.integers(120, 256, 3))
        im = Image.new("RGB", (w, h), bg)
        d = ImageDraw.Draw(im)
        r = rng.uniform(0.2, 0.35) * min(w, h)
        cx, cy = w / 2 + rng.uniform(-0.15, 0.15) * w, h / 2 + rng.uniform(-0.15, 0.15) * h
        if shape == "circle":
            d.ellipse([cx - r, cy - r, cx + r, cy + r], fill=fg)
        elif shape == "square":
            d.rectangle([cx - r, cy - r, cx + r, cy + r], fill=fg)
        elif shape == "triangle":
            d.polygon([(cx, cy - r), (cx - r, cy + r), (cx + r, cy + r)], fill=fg)
        else:
            d.rectangle([cx - r, cy - r / 3, cx + r, cy + r / 3], fill=fg)
            d.rectangle([cx - r / 3, cy - r, cx + r / 3, cy + r], fill=fg)
        a = np.asarray(im).astype(np.int16) + rng.integers(-20, 21, (h, w, 3))
        im = Image.fromarray(np.clip(a, 0, 255).astype(np.uint8))
        if i % 2:
            im.save(os.path.join(root, shape, f"{i:03d}.jpg"), quality=90)
        else:
            im.save(os.path.join(root, shape, f"{i:03d}.png"))
PY

echo "== 1. vitkd prepare folder (2 ranks)"
mpirun -n 2 "$vitkd" prepare folder "$work/photos" --out "$work/shapes.h5" --size 32 \
  --test-fraction 0.2 --seed 1

echo "== 2. a PyTorch teacher (a small CNN) -> TorchScript"
/usr/bin/python3 - "$work" <<'PY'
import sys, time, h5py, torch, torch.nn as nn
work = sys.argv[1]
torch.manual_seed(0)
f = h5py.File(f"{work}/shapes.h5", "r")
mean, std = (torch.tensor(f.attrs[k]).float() for k in ("mean", "std"))
def inputs(split):   # exactly vitkd's input: (pixel/255 - mean) / std, NCHW
    x = torch.from_numpy(f[split]["images"][()]).float() / 255
    return ((x - mean) / std).permute(0, 3, 1, 2).contiguous(), torch.from_numpy(f[split]["labels"][()]).long()
xtr, ytr = inputs("train")
xte, yte = inputs("test")
net = nn.Sequential(nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                    nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                    nn.Conv2d(64, 64, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                    nn.Flatten(), nn.Linear(64, len(f.attrs["class_names"])))
opt = torch.optim.AdamW(net.parameters(), 2e-3)
t0 = time.time()
for epoch in range(12):
    perm = torch.randperm(len(ytr))
    for i in range(0, len(ytr), 64):
        idx = perm[i:i + 64]
        loss = nn.functional.cross_entropy(net(xtr[idx]), ytr[idx])
        opt.zero_grad(); loss.backward(); opt.step()
net.eval()
with torch.no_grad():
    acc = (net(xte).argmax(1) == yte).float().mean().item()
torch.jit.save(torch.jit.script(net), f"{work}/teacher.pt")
print(f"teacher: CNN, {sum(p.numel() for p in net.parameters())} parameters, "
      f"test top-1 {acc:.4f} after {time.time() - t0:.0f} s -> {work}/teacher.pt")
PY

echo "== 3. vitkd distills a ViT student from the TorchScript teacher (2 ranks)"
mpirun -n 2 "$vitkd" train "$src/inputs/smoke.toml" --set run.mode=distill \
  --set teacher.torchscript="$work/teacher.pt" --set data.path="$work/shapes.h5" \
  --set model.image_size=32 --set model.channels=3 --set model.patch=8 --set model.classes=4 \
  --set model.dim=48 --set model.depth=3 --set model.heads=3 --set model.dist_token=true \
  --set distill.alpha=0.9 --set distill.temperature=2.0 \
  --set data.batch_size=32 --set train.epochs=30 --set train.eval_every_epochs=10 \
  --set optim.warmup_steps=20 --set train.log_every_steps=50 --set run.out_dir="$work/student" \
  | grep -E "^(teacher|student|epoch [0-9]+:|done)"

echo "== 4. export the student, load it in PyTorch, serve it"
"$vitkd" export "$work/student/checkpoint.h5" --out "$work/export"
/usr/bin/python3 "$work/export/vitkd_export.py" "$work/export"
/usr/bin/python3 - "$work" <<'PY'
import json, sys, h5py, torch
work = sys.argv[1]
model = torch.jit.load(f"{work}/export/student.pt")     # serving: TorchScript + model.json only
meta = json.load(open(f"{work}/export/model.json"))
with h5py.File(f"{work}/shapes.h5", "r") as f:
    imgs, labels = f["test"]["images"][()], torch.from_numpy(f["test"]["labels"][()]).long()
x = torch.as_tensor(imgs).float() / 255
x = ((x - torch.tensor(meta["mean"])) / torch.tensor(meta["std"])).permute(0, 3, 1, 2)
with torch.no_grad():
    acc = (model(x).argmax(1) == labels).float().mean().item()
vk = json.load(open(f"{work}/student/result.json"))["test_top1"]
print(f"served student.pt: test top-1 {acc:.4f} (vitkd's bf16 evaluation: {vk:.4f}); "
      f"classes {meta['class_names']}")
PY
