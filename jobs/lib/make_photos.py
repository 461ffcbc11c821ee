#!/usr/bin/env python3
"""A folder of generated photos for the photo workload's tests and demo.

    python3 jobs/lib/make_photos.py ROOT [--per-class N] [--seed S] [--classes K] [--texture noise|smooth]

K classes (default four: ROOT/class0..class3): a coloured disc (the class's
colour; past the first four, colours around the hue circle) on a
textured background, at a random place and size, in photos of 240 to 330
pixels a side; every fourth a PNG, the others JPEG at quality 90. Needs numpy
and PIL. The background is per-pixel noise by default (JPEG's worst case:
it hardly compresses); --texture smooth makes it a smooth random field with
mild noise, which JPEG compresses well (better than camera photos: about
1/20 of raw at 256 and quality 90), for the loader benchmarks.
"""
import argparse
import os

import numpy as np
from PIL import Image

COLOURS = [(200, 40, 40), (40, 180, 60), (50, 60, 210), (220, 200, 40)]


def colours(k):
    """The first four fixed (the tests' photos), then evenly spaced hues."""
    out = COLOURS[:k]
    for i in range(len(out), k):
        h = 6.0 * (i - 4) / max(1, k - 4)
        x = 1 - abs(h % 2 - 1)
        r, g, b = [(1, x, 0), (x, 1, 0), (0, 1, x), (0, x, 1), (x, 0, 1), (1, 0, x)][int(h) % 6]
        out.append(tuple(int(40 + 180 * v) for v in (r, g, b)))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("root")
    ap.add_argument("--per-class", type=int, default=60)
    ap.add_argument("--seed", type=int, default=3)
    ap.add_argument("--classes", type=int, default=len(COLOURS))
    ap.add_argument("--texture", choices=["noise", "smooth"], default="noise")
    a = ap.parse_args()
    rng = np.random.default_rng(a.seed)
    cols = colours(a.classes)
    for k, c in enumerate(cols):
        d = os.path.join(a.root, f"class{k}")
        os.makedirs(d)
        for i in range(a.per_class):
            w, h = (int(v) for v in rng.integers(240, 331, size=2))
            img = rng.integers(60, 140, size=(h, w, 3)).astype(np.float32)
            if a.texture == "smooth":  # a 6x6 grid of colours, bilinear, plus noise of +-4 levels
                grid = Image.fromarray(rng.integers(30, 220, size=(6, 6, 3)).astype(np.uint8))
                img = np.asarray(grid.resize((w, h), Image.BILINEAR), np.float32) + (img - 100) / 10
            yy, xx = np.mgrid[0:h, 0:w]
            r = rng.uniform(0.15, 0.35) * min(h, w)
            cy, cx = rng.uniform(0.35, 0.65) * h, rng.uniform(0.35, 0.65) * w
            disc = (yy - cy) ** 2 + (xx - cx) ** 2 < r * r
            img[disc] = 0.7 * np.array(c, np.float32) + 0.3 * img[disc]
            im = Image.fromarray(img.clip(0, 255).astype(np.uint8))
            if i % 4 == 0:
                im.save(os.path.join(d, f"p{i}.png"))
            else:
                im.save(os.path.join(d, f"p{i}.jpg"), quality=90)
    print(f"make_photos: {len(cols) * a.per_class} photos of {len(cols)} classes in {a.root}")


if __name__ == "__main__":
    main()
