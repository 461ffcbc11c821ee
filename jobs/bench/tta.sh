#!/usr/bin/env bash
# Time to accuracy: vitkd and benchmarks/pytorch_baseline.py train the
# Fashion-MNIST teacher (inputs/fmnist-teacher.toml: ViT dim 192, depth 6,
# batch 64 per rank, seed 1) with the same plain PyTorch recipe: PyTorch's
# default initialisation, LayerNorm eps 1e-5, weight decay on every parameter,
# no gradient clipping, warm-up over 10 % of the steps, cosine decay to 0.
# Both evaluate test top-1 after every epoch; then analysis/tta_plot.py draws
# test top-1 against training wall time (evaluations excluded) and against
# samples seen into OUT/tta.png and prints a markdown table of the time and
# samples each needed to first reach each of train.accuracy_thresholds.
#   jobs/bench/tta.sh [EPOCHS]        (default 3; needs build/vitkd and data/fmnist.h5)
# Environment:
#   NP=2                ranks of each run
#   STEPS=0             stop each run after this many optimizer steps (0 = all the epochs)
#   THREADS=1           compute threads per rank (train.threads, --threads)
#   EVAL_EVERY_STEPS=0  vitkd also evaluates every N steps (train.eval_every_steps; the
#                       baseline evaluates after each epoch only)
#   OUT=runs/bench-tta  where the runs, their logs and tta.png go
# Checkpoints are written at the end only (checkpoint.every_steps = 0): the
# baseline writes none. A quick check that the script runs end to end:
#   STEPS=60 jobs/bench/tta.sh 1
set -euo pipefail
cd "$(dirname "$0")/../.."
source jobs/env.sh
EPOCHS=${1:-3}
NP=${NP:-2}
STEPS=${STEPS:-0}
THREADS=${THREADS:-1}
EVAL_EVERY_STEPS=${EVAL_EVERY_STEPS:-0}
OUT=${OUT:-runs/bench-tta}
DATA=data/fmnist.h5
BATCH=64
[ -x build/vitkd ] || { echo "no build/vitkd; build it first (jobs/build.sh)" >&2; exit 2; }
[ -f "$DATA" ] || { echo "no $DATA; make it with: build/vitkd prepare fashion-mnist --out $DATA" >&2; exit 2; }
mkdir -p "$OUT"

# Warm-up = 10 % of the run's steps, rounded as the baseline's --warmup-fraction rounds.
WARMUP=$(/usr/bin/python3 - "$DATA" "$EPOCHS" "$STEPS" "$((BATCH * NP))" <<'PY'
import h5py, sys
data, epochs, steps, g = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
with h5py.File(data, "r") as f:
    n = f["train/labels"].shape[0]
total = epochs * (-(-n // g))
if steps > 0:
    total = min(total, steps)
print(int(round(0.1 * total)))
PY
)
echo "time to accuracy: $EPOCHS epoch(s), $NP ranks x $THREADS thread(s), warm-up $WARMUP steps -> $OUT"

rm -rf "$OUT/vitkd"
mpirun -n "$NP" build/vitkd train inputs/fmnist-teacher.toml \
  --set model.init=torch --set model.decay=all --set model.norm_eps=1e-5 --set optim.grad_clip=0 \
  --set data.augment=false \
  --set optim.min_lr=0 --set optim.warmup_steps="$WARMUP" \
  --set train.epochs="$EPOCHS" --set train.max_steps="$STEPS" --set train.threads="$THREADS" \
  --set train.eval_every_epochs=1 --set train.eval_every_steps="$EVAL_EVERY_STEPS" \
  --set checkpoint.every_steps=0 --set checkpoint.resume=never --set run.out_dir="$OUT/vitkd" \
  > "$OUT/vitkd.log" 2>&1 || { echo "vitkd run failed (see $OUT/vitkd.log)" >&2; exit 1; }
echo "vitkd: $(grep '^done:' "$OUT/vitkd.log" || tail -1 "$OUT/vitkd.log")"

mkdir -p "$OUT/pytorch"
/usr/bin/python3 benchmarks/pytorch_baseline.py --nproc "$NP" --data "$DATA" --recipe plain \
  --seed 1 --batch-size "$BATCH" --epochs "$EPOCHS" --max-steps "$STEPS" --threads "$THREADS" \
  --log-every 100 --eval-every-epoch --out "$OUT/pytorch/result.json" \
  > "$OUT/pytorch.log" 2>&1 || { echo "PyTorch run failed (see $OUT/pytorch.log)" >&2; exit 1; }
echo "pytorch: $(grep '^done:' "$OUT/pytorch.log" || tail -1 "$OUT/pytorch.log")"

/usr/bin/python3 analysis/tta_plot.py "$OUT/vitkd/result.json" "$OUT/pytorch/result.json" \
  --labels vitkd,pytorch --out "$OUT/tta.png"
