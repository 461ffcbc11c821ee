#!/usr/bin/env bash
# The loader at 224x224 from a 256x256 store: `vitkd bench loader` against
# torchvision's transforms.v2 in a DataLoader (benchmarks/loader_torchvision.py,
# the venv of jobs/setup-torch2.sh), alternating, ROUNDS rounds, at 1 and 2
# cores (vitkd: ranks under mpirun; torchvision: worker processes). Writes
# OUT/summary.json with the medians per core. A benchmark, not a test.
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
for r in $(seq 1 "$ROUNDS"); do
  for n in 1 2; do
    echo "round $r, $n core(s)"
    mpirun --oversubscribe -n "$n" build/vitkd bench loader --data "$DATA" --millis 4000 \
      --out "$OUT/vitkd-$n-$r.json" | grep "read + transform"
    "$VENV/bin/python" benchmarks/loader_torchvision.py --data "$DATA" --workers "$n" --seconds 6 \
      --out "$OUT/tv-$n-$r.json"
  done
done
"$VENV/bin/python" - "$OUT" "$ROUNDS" <<'PY'
import json, statistics, subprocess, sys
out, rounds = sys.argv[1], int(sys.argv[2])
s = {"cpu": subprocess.run(["sh", "-c", "lscpu | sed -n 's/^Model name: *//p'"], capture_output=True,
                           text=True).stdout.strip(), "rounds": rounds}
for n in (1, 2):
    v = [json.load(open(f"{out}/vitkd-{n}-{r}.json"))["images_per_s_per_core"] for r in range(1, rounds + 1)]
    t = [json.load(open(f"{out}/tv-{n}-{r}.json"))["images_per_s_per_worker"] for r in range(1, rounds + 1)]
    s[f"{n}_cores"] = {"vitkd_per_core": statistics.median(v), "torchvision_per_worker": statistics.median(t),
                       "ratio": statistics.median(v) / statistics.median(t), "vitkd_runs": v, "torchvision_runs": t}
    print(f"{n} core(s): vitkd {statistics.median(v):.0f} images/s per core, torchvision "
          f"{statistics.median(t):.0f} per worker: {statistics.median(v) / statistics.median(t):.2f}x")
json.dump(s, open(f"{out}/summary.json", "w"), indent=2)
PY
