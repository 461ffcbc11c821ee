#!/usr/bin/env bash
# The loader's threads against a training step: one rank with one compute
# thread trains a small ViT at 224x224 from the 256x256 store of
# jobs/bench/loader.sh with the full photo transform (random-resized crop,
# flip, TrivialAugmentWide, random erasing 0.25, Mixup 0.8 / CutMix 1.0),
# once with the transform on the compute thread (data.loader_threads = 0) and
# once with one loader thread on the second core (data.loader_threads = 1),
# alternating, ROUNDS rounds. The model (patch 16, dim 64, depth 2) is small
# enough that its step takes about as long as the batch's transform, the case
# where the loader decides the rate. Prints per run images/s and the share of
# the step spent waiting for data (timing log's data_wait over the training
# time); writes OUT/loader-threads.json with the medians. A benchmark, not a test.
#
#   bash jobs/bench/loader_threads.sh [OUT]    # default runs/bench-loader
#   ROUNDS=3 STEPS=40 BATCH=32
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:-runs/bench-loader}
ROUNDS=${ROUNDS:-3}
STEPS=${STEPS:-40}
BATCH=${BATCH:-32}
mkdir -p "$OUT"
source jobs/env.sh
DATA=$OUT/store256.h5
[ -f "$DATA" ] || build/vitkd prepare synthetic --out "$DATA" --train "${TRAIN:-1024}" --test 64 --size 256 \
  --channels 3 --classes 10 > /dev/null
CFG=$OUT/loader-threads.toml
cat > "$CFG" <<EOF
# jobs/bench/loader_threads.sh
[data]
path = "$DATA"
batch_size = $BATCH
augment = true
crop = "random_resized"
policy = "trivial_augment"
random_erase = 0.25
mixup = 0.8
cutmix = 1.0
[model]
image_size = 224
channels = 3
patch = 16
dim = 64
depth = 2
heads = 2
classes = 10
[train]
max_steps = $STEPS
threads = 1
final_eval = false
eval_every_epochs = 0
log_every_steps = 10
[checkpoint]
every_steps = 0
resume = "never"
EOF
for r in $(seq 1 "$ROUNDS"); do
  for t in 0 1; do
    d=$OUT/loader-threads-$t-$r
    build/vitkd train "$CFG" --set data.loader_threads=$t --set run.out_dir=\""$d"\" > "$d.log" 2>&1 ||
      { echo "run failed: $d.log" >&2; exit 1; }
    /usr/bin/python3 - "$d" "$t" <<'PY'
import json, sys
r = json.load(open(f"{sys.argv[1]}/result.json"))
wait = r["phase_seconds_rank0"][0] / r["train_seconds"]  # data_wait is the first phase
print(f"data.loader_threads = {sys.argv[2]}: {r['images_per_second']:.0f} images/s, data wait {100 * wait:.1f} % "
      f"of the training time, compute {r['compute']}")
PY
  done
done
/usr/bin/python3 - "$OUT" "$ROUNDS" <<'PY'
import json, statistics, subprocess, sys
out, rounds = sys.argv[1], int(sys.argv[2])
s = {"cpu": subprocess.run(["sh", "-c", "lscpu | sed -n 's/^Model name: *//p'"], capture_output=True,
                           text=True).stdout.strip(), "rounds": rounds}
for t in (0, 1):
    rs = [json.load(open(f"{out}/loader-threads-{t}-{r}/result.json")) for r in range(1, rounds + 1)]
    ips = [r["images_per_second"] for r in rs]
    wait = [r["phase_seconds_rank0"][0] / r["train_seconds"] for r in rs]
    s[f"loader_threads_{t}"] = {"images_per_second": statistics.median(ips), "data_wait_fraction":
                                statistics.median(wait), "runs": ips, "libtorch": rs[0].get("libtorch")}
s["speedup"] = s["loader_threads_1"]["images_per_second"] / s["loader_threads_0"]["images_per_second"]
json.dump(s, open(f"{out}/loader-threads.json", "w"), indent=2)
print(f"medians: 0 loader threads {s['loader_threads_0']['images_per_second']:.0f} images/s (data wait "
      f"{100 * s['loader_threads_0']['data_wait_fraction']:.1f} %), 1 loader thread "
      f"{s['loader_threads_1']['images_per_second']:.0f} (data wait "
      f"{100 * s['loader_threads_1']['data_wait_fraction']:.1f} %): {s['speedup']:.2f}x")
PY
