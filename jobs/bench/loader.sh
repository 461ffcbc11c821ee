#!/usr/bin/env bash
# The loader at 224x224 from a 256x256 store: `vitkd bench loader` against
# torchvision's transforms.v2 in a DataLoader (benchmarks/loader_torchvision.py,
# the venv of jobs/setup-torch2.sh), alternating, ROUNDS rounds, at 1 and 2
# cores (vitkd: ranks under mpirun; torchvision: worker processes), for three
# transforms: "crop" (random-resized crop + flip), "mix" (+ Mixup 0.8 /
# CutMix 1.0) and "full" (+ TrivialAugmentWide and random erasing 0.25, DeiT's
# recipe). Writes OUT/summary.json with the medians per core ("1_cores" and
# "2_cores" are the crop's, as before 0.4.6). A benchmark, not a test.
#
#   bash jobs/bench/loader.sh [OUT]      # default runs/bench-loader
#   ROUNDS=3 TRAIN=1024                  # rounds, images in the generated store
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:-runs/bench-loader}
ROUNDS=${ROUNDS:-3}
mkdir -p "$OUT"
source jobs/env.sh
VENV=$(bash jobs/setup-torch2.sh | tail -n 1)
DATA=$OUT/store256.h5
[ -f "$DATA" ] || build/vitkd prepare synthetic --out "$DATA" --train "${TRAIN:-1024}" --test 64 --size 256 \
  --channels 3 --classes 10 > /dev/null
declare -A FLAGS=([crop]="" [mix]="--mixup 0.8 --cutmix 1.0"
                  [full]="--policy trivial_augment --random-erase 0.25 --mixup 0.8 --cutmix 1.0")
for r in $(seq 1 "$ROUNDS"); do
  for t in crop mix full; do
    for n in 1 2; do
      echo "round $r, $t, $n core(s)"
      # shellcheck disable=SC2086
      mpirun --oversubscribe -n "$n" build/vitkd bench loader --data "$DATA" --millis 4000 ${FLAGS[$t]} \
        --out "$OUT/vitkd-$t-$n-$r.json" | grep "read + transform"
      # shellcheck disable=SC2086
      "$VENV/bin/python" benchmarks/loader_torchvision.py --data "$DATA" --workers "$n" --seconds 6 ${FLAGS[$t]} \
        --out "$OUT/tv-$t-$n-$r.json"
    done
  done
done
"$VENV/bin/python" - "$OUT" "$ROUNDS" <<'PY'
import json, statistics, subprocess, sys
out, rounds = sys.argv[1], int(sys.argv[2])
s = {"cpu": subprocess.run(["sh", "-c", "lscpu | sed -n 's/^Model name: *//p'"], capture_output=True,
                           text=True).stdout.strip(), "rounds": rounds}
for t in ("crop", "mix", "full"):
    for n in (1, 2):
        v = [json.load(open(f"{out}/vitkd-{t}-{n}-{r}.json"))["images_per_s_per_core"] for r in range(1, rounds + 1)]
        w = [json.load(open(f"{out}/tv-{t}-{n}-{r}.json"))["images_per_s_per_worker"] for r in range(1, rounds + 1)]
        row = {"vitkd_per_core": statistics.median(v), "torchvision_per_worker": statistics.median(w),
               "ratio": statistics.median(v) / statistics.median(w), "vitkd_runs": v, "torchvision_runs": w}
        s.setdefault(t, {})[f"{n}_cores"] = row
        if t == "crop":
            s[f"{n}_cores"] = row
        print(f"{t}, {n} core(s): vitkd {row['vitkd_per_core']:.0f} images/s per core, torchvision "
              f"{row['torchvision_per_worker']:.0f} per worker: {row['ratio']:.2f}x")
json.dump(s, open(f"{out}/summary.json", "w"), indent=2)
PY
