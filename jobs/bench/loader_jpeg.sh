#!/usr/bin/env bash
# Photos stored as JPEG in the dataset file against raw pixels, at 224x224
# from a 256x256 store: the file sizes (raw, JPEG in the HDF5 file, the same
# JPEGs as a folder of files) and the loader's images per second per core,
# including the decoding, for "crop" (random-resized crop + flip) and "full"
# (+ TrivialAugmentWide, random erasing 0.25, Mixup 0.8 / CutMix 1.0):
# `vitkd bench loader` on the raw and the JPEG file, one rank, and
# torchvision's transforms.v2 in a DataLoader of one worker decoding the same
# JPEGs from the folder (benchmarks/loader_torchvision.py --jpeg-dir). Writes
# OUT/result.json. A benchmark, not a test: run it on a quiet machine.
#
#   bash jobs/bench/loader_jpeg.sh [OUT]       # default runs/bench-loader-jpeg
#   PER_CLASS=250 SIZE=256 QUALITY=90          # generated photos (4 classes) and the store
#   PHOTOS=DIR                                 # a folder of your own photos instead (DIR/<class>/*.jpg)
#   MILLIS=5000 TV_SECONDS=8 ROUNDS=3          # measuring time per rate, rounds (medians)
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:-runs/bench-loader-jpeg}
SIZE=${SIZE:-256}
QUALITY=${QUALITY:-90}
MILLIS=${MILLIS:-5000}
TV_SECONDS=${TV_SECONDS:-8}
ROUNDS=${ROUNDS:-3}
mkdir -p "$OUT"
source jobs/env.sh
VENV=$(bash jobs/setup-torch2.sh | tail -n 1)
PY=$VENV/bin/python
PHOTOS=${PHOTOS:-$OUT/photos}
[ -d "$PHOTOS" ] || "$PY" jobs/lib/make_photos.py "$PHOTOS" --per-class "${PER_CLASS:-250}" --seed 1 --texture smooth
P=(prepare folder "$PHOTOS" --size "$SIZE" --test-fraction 0.05 --seed 1)
build/vitkd "${P[@]}" --out "$OUT/raw.h5" | tail -n 1
build/vitkd "${P[@]}" --out "$OUT/jpeg.h5" --store jpeg --quality "$QUALITY" | tail -n 1
# The JPEG folder: /train's bytes of jpeg.h5 as files OUT/jpeg/<label>/<i>.jpg.
"$PY" - "$OUT" <<'PY'
import os, shutil, sys
import h5py
out = sys.argv[1]
shutil.rmtree(f"{out}/jpeg", ignore_errors=True)
with h5py.File(f"{out}/jpeg.h5", "r") as f:
    b, off, lab = f["train/jpeg"][()], f["train/jpeg_offsets"][()], f["train/labels"][()]
for i, y in enumerate(lab):
    os.makedirs(f"{out}/jpeg/{y}", exist_ok=True)
    with open(f"{out}/jpeg/{y}/{i}.jpg", "wb") as g:
        g.write(b[off[i]:off[i + 1]].tobytes())
PY
declare -A FLAGS=([crop]="" [full]="--policy trivial_augment --random-erase 0.25 --mixup 0.8 --cutmix 1.0")
for r in $(seq 1 "$ROUNDS"); do
  for t in crop full; do
    for store in raw jpeg; do
      # shellcheck disable=SC2086
      build/vitkd bench loader --data "$OUT/$store.h5" --millis "$MILLIS" ${FLAGS[$t]} \
        --out "$OUT/vitkd-$store-$t-$r.json" | grep "read + transform" | sed "s/^/round $r, $t, $store: /"
    done
    # shellcheck disable=SC2086
    "$PY" benchmarks/loader_torchvision.py --data "$OUT/jpeg.h5" --jpeg-dir "$OUT/jpeg" --workers 1 \
      --seconds "$TV_SECONDS" ${FLAGS[$t]} --out "$OUT/tv-$t-$r.json" | sed "s/^/round $r, $t: /"
  done
done
"$PY" - "$OUT" "$ROUNDS" "$SIZE" "$QUALITY" <<'PY'
import json, os, statistics, subprocess, sys
out, rounds, size, quality = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
du = lambda p: sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(p) for f in fs)
raw, jpeg, folder = os.path.getsize(f"{out}/raw.h5"), os.path.getsize(f"{out}/jpeg.h5"), du(f"{out}/jpeg")
r = {"cpu": subprocess.run(["sh", "-c", "lscpu | sed -n 's/^Model name: *//p'"], capture_output=True,
                           text=True).stdout.strip(), "rounds": rounds, "store_size": size, "image_size": 224,
     "quality": quality, "bytes": {"raw_h5": raw, "jpeg_h5": jpeg, "jpeg_folder_train": folder},
     "jpeg_over_raw": jpeg / raw}
print(f"sizes: raw {raw / 1e6:.1f} MB, JPEG in the HDF5 file {jpeg / 1e6:.1f} MB ({jpeg / raw:.3f} of raw), "
      f"JPEG folder (train) {folder / 1e6:.1f} MB")
med = lambda xs: statistics.median(xs)
for t in ("crop", "full"):
    v = {s: med([json.load(open(f"{out}/vitkd-{s}-{t}-{k}.json"))["images_per_s_per_core"]
                 for k in range(1, rounds + 1)]) for s in ("raw", "jpeg")}
    tv = med([json.load(open(f"{out}/tv-{t}-{k}.json"))["images_per_s_per_worker"] for k in range(1, rounds + 1)])
    r[t] = {"vitkd_raw_per_core": v["raw"], "vitkd_jpeg_per_core": v["jpeg"], "torchvision_jpeg_per_worker": tv,
            "jpeg_over_torchvision": v["jpeg"] / tv}
    print(f"{t}: vitkd raw {v['raw']:.0f}, vitkd JPEG {v['jpeg']:.0f} images/s per core; torchvision decoding the "
          f"same JPEGs {tv:.0f} per worker: {v['jpeg'] / tv:.2f}x")
json.dump(r, open(f"{out}/result.json", "w"), indent=2)
print(f"wrote {out}/result.json")
PY
