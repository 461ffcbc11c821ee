"""The anchor for `vitkd bench loader`: the same training transform in
torchvision (transforms.v2 on uint8 tensors: RandomResizedCrop to 224 with
bilinear resampling and no antialiasing, as vitkd resamples; a horizontal
flip; optionally TrivialAugmentWide; ToDtype float and Normalize;
optionally RandomErasing with normal noise; optionally MixUp / CutMix on the
batch in the collate function, so in the workers), fed by a DataLoader
whose worker processes read the samples from the same vitkd dataset file
with h5py.

A benchmark, not a test. Run it with the venv of jobs/setup-torch2.sh
(torchvision comes with timm there):

    ~/.cache/vitkd/torch2-venv/bin/python benchmarks/loader_torchvision.py \\
        --data /tmp/bench256.h5 --workers 1 --seconds 10 [--out FILE.json] \\
        [--policy trivial_augment] [--random-erase 0.25] [--mixup 0.8] [--cutmix 1.0]

With --jpeg-dir DIR the workers read JPEG files instead, DIR/<label>/<i>.jpg
(jobs/bench/loader_jpeg.sh writes the bytes of a `prepare folder --store
jpeg` file there, so both decode the same JPEGs), and decode them with
torchvision.io.decode_jpeg (libjpeg-turbo) before the transform; --data
then only gives the mean and std.

Prints images per second over the measuring time (after one warm-up batch)
and per worker process (per core: each worker is one process on one core,
the main process only collects the batches); vitkd's figure to compare is
`vitkd bench loader`'s "read + transform" per core at the same image size.
"""
import argparse
import json
import os
import platform
import time

import h5py
import numpy as np
import torch
import torchvision
from torch.utils.data import DataLoader
from torchvision.transforms import v2

from h5_train import H5Train  # the benchmarks' folder


class JpegFolderTrain(torch.utils.data.Dataset):
    """DIR/<label>/*.jpg -> (transform(decoded uint8 tensor [C, H, W]), label),
    each file read and decoded in the worker (torchvision.io, libjpeg-turbo)."""

    def __init__(self, root, transform):
        self.transform = transform
        self.items = [(os.path.join(root, d, f), int(d)) for d in sorted(os.listdir(root))
                      for f in sorted(os.listdir(os.path.join(root, d))) if f.endswith(".jpg")]

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        path, label = self.items[i]
        img = torchvision.io.decode_jpeg(torchvision.io.read_file(path), mode=torchvision.io.ImageReadMode.RGB)
        return self.transform(img), label


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", required=True)
    ap.add_argument("--image-size", type=int, default=224)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--policy", choices=["none", "trivial_augment"], default="none")
    ap.add_argument("--random-erase", type=float, default=0.0)
    ap.add_argument("--mixup", type=float, default=0.0)
    ap.add_argument("--cutmix", type=float, default=0.0)
    ap.add_argument("--jpeg-dir", help="read and decode DIR/<label>/*.jpg instead of the file's pixels")
    ap.add_argument("--out")
    a = ap.parse_args()
    torch.set_num_threads(1)
    with h5py.File(a.data, "r") as f:
        mean, std = list(f.attrs["mean"]), list(f.attrs["std"])
    ops = [v2.RandomResizedCrop(a.image_size, interpolation=v2.InterpolationMode.BILINEAR, antialias=False),
           v2.RandomHorizontalFlip()]
    if a.policy == "trivial_augment":
        ops.append(v2.TrivialAugmentWide(interpolation=v2.InterpolationMode.NEAREST))
    ops += [v2.ToDtype(torch.float32, scale=True), v2.Normalize(mean, std)]
    if a.random_erase > 0:
        ops.append(v2.RandomErasing(p=a.random_erase, value="random"))
    transform = v2.Compose(ops)
    ds = JpegFolderTrain(a.jpeg_dir, transform) if a.jpeg_dir else H5Train(a.data, transform)
    collate = None
    mixers = []
    if a.mixup > 0 or a.cutmix > 0:
        with h5py.File(a.data, "r") as f:
            classes = int(f["train/labels"][()].max()) + 1
        if a.mixup > 0:
            mixers.append(v2.MixUp(alpha=a.mixup, num_classes=classes))
        if a.cutmix > 0:
            mixers.append(v2.CutMix(alpha=a.cutmix, num_classes=classes))
        mix = v2.RandomChoice(mixers)
        collate = lambda batch: mix(*torch.utils.data.default_collate(batch))  # noqa: E731
    loader = DataLoader(ds, batch_size=a.batch, shuffle=True, num_workers=a.workers, drop_last=True,
                        persistent_workers=True, worker_init_fn=lambda _: torch.set_num_threads(1),
                        collate_fn=collate)
    images, t0 = 0, None
    while t0 is None or time.perf_counter() - t0 < a.seconds:
        for x, _ in loader:
            if t0 is None:  # the first batch starts the workers: not measured
                t0 = time.perf_counter()
                continue
            images += x.shape[0]
            if time.perf_counter() - t0 >= a.seconds:
                break
    rate = images / (time.perf_counter() - t0)
    r = {"torch": torch.__version__, "torchvision": torchvision.__version__, "cpu": platform.processor(),
         "workers": a.workers, "batch": a.batch, "image_size": a.image_size, "policy": a.policy,
         "random_erase": a.random_erase, "mixup": a.mixup, "cutmix": a.cutmix, "images_per_s": rate,
         "images_per_s_per_worker": rate / a.workers, "source": "jpeg files" if a.jpeg_dir else "h5 pixels"}
    print(f"torchvision {torchvision.__version__} transforms.v2{' with JPEG decoding' if a.jpeg_dir else ''}, "
          f"{a.workers} worker(s): "
          f"{rate:.0f} images/s, {rate / a.workers:.0f} per worker")
    if a.out:
        os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
        json.dump(r, open(a.out, "w"), indent=2)


if __name__ == "__main__":
    main()
