#!/usr/bin/env bash
# vitkd against the same recipe in PyTorch (benchmarks/pytorch_baseline.py:
# DDP over gloo, ZeroRedundancyOptimizer(AdamW), bf16 autocast), run
# alternately on this machine, REPEATS times each; prints each run and the
# medians. Scenarios (Fashion-MNIST, the inputs/ model sizes, batch 64 per rank):
#   teacher        teacher training, 2 ranks
#   distill        distillation without sifting, 2 ranks
#   distill+sift   vitkd with sifting (ce, beta 1, from step 20) vs the baseline's plain distillation
#   1 vs 2 ranks   vitkd teacher training at 1 and 2 ranks (weak scaling: same batch per rank)
# images/s = samples trained per second, evaluation and start-up excluded.
#   jobs/bench/vs_pytorch.sh [REPEATS] [STEPS]   (needs build/vitkd, data/fmnist.h5 and
#   a teacher checkpoint, TEACHER=runs/fmnist-teacher/checkpoint.h5 by default)
# ONLY=distill (or teacher, sift, scaling; comma-separated) runs only those
# scenarios (sift needs distill for its baseline, scaling needs teacher).
set -euo pipefail
cd "$(dirname "$0")/../.."
source jobs/env.sh
REPEATS=${1:-3}
STEPS=${2:-150}
TEACHER=${TEACHER:-runs/fmnist-teacher/checkpoint.h5}
OUT=${OUT:-runs/bench-vs-pytorch}
mkdir -p "$OUT"
[ -f "$TEACHER" ] || { echo "no teacher checkpoint at $TEACHER" >&2; exit 2; }
COMMON=(--set checkpoint.resume=never --set checkpoint.every_steps=0 --set train.final_eval=false
        --set train.eval_every_epochs=0 --set train.max_steps="$STEPS" --set train.threads=1
        --set train.mfu_ceiling=2e11)
PT=(/usr/bin/python3 benchmarks/pytorch_baseline.py --data data/fmnist.h5 --max-steps "$STEPS" --epochs 1)

vitkd() {  # NP DIR ARGS...
  local np=$1 dir=$2; shift 2
  mpirun -n "$np" build/vitkd train "$@" --set run.out_dir="$dir" "${COMMON[@]}" > "$dir.log" 2>&1 \
    || { echo "vitkd run failed (see $dir.log)" >&2; exit 1; }
}
pytorch() {  # NP DIR ARGS...
  local np=$1 dir=$2; shift 2
  mkdir -p "$dir"
  "${PT[@]}" --nproc "$np" "$@" --out "$dir/result.json" > "$dir.log" 2>&1 \
    || { echo "PyTorch run failed (see $dir.log)" >&2; exit 1; }
}
ONLY=${ONLY:-teacher,distill,sift,scaling}
want() { [[ ",$ONLY," == *",$1,"* ]]; }
for ((r = 0; r < REPEATS; r++)); do
  if want teacher; then
    vitkd 2 "$OUT/teacher-vitkd-$r" inputs/fmnist-teacher.toml --set data.augment=false  # as the baseline
    pytorch 2 "$OUT/teacher-pytorch-$r" --mode teacher
  fi
  if want distill; then
    vitkd 2 "$OUT/distill-vitkd-$r" inputs/fmnist-distill.toml --set data.augment=false --set teacher.checkpoint="$TEACHER"
    pytorch 2 "$OUT/distill-pytorch-$r" --mode distill --teacher "$TEACHER" --dim 96 --depth 4
  fi
  if want sift; then
    vitkd 2 "$OUT/sift-vitkd-$r" inputs/fmnist-distill.toml --set data.augment=false --set teacher.checkpoint="$TEACHER" \
      --set sift.enabled=true --set sift.beta=1 --set sift.delay=20
  fi
  if want scaling; then vitkd 1 "$OUT/teacher1-vitkd-$r" inputs/fmnist-teacher.toml --set data.augment=false; fi
  echo "repeat $((r + 1))/$REPEATS done"
done
/usr/bin/python3 - "$OUT" "$REPEATS" "$ONLY" <<'PY'
import json, statistics, sys
out, reps, only = sys.argv[1], int(sys.argv[2]), sys.argv[3].split(",")
def med(name):
    v = [json.load(open(f"{out}/{name}-{r}/result.json"))["images_per_second"] for r in range(reps)]
    return statistics.median(v), v
rows = [("teacher training", "teacher-vitkd", "teacher-pytorch", "teacher"),
        ("distillation, no sifting", "distill-vitkd", "distill-pytorch", "distill"),
        ("distillation, vitkd sifting (ce, beta 1)", "sift-vitkd", "distill-pytorch", "sift")]
rows = [r[:3] for r in rows if r[3] in only and (r[3] != "sift" or "distill" in only)]
print(f"{'scenario':<44}{'vitkd img/s':>12}{'PyTorch img/s':>15}{'ratio':>8}")
for label, a, b in rows:
    (ma, va), (mb, vb) = med(a), med(b)
    print(f"{label:<44}{ma:12.1f}{mb:15.1f}{ma / mb:8.2f}   runs {['%.0f' % x for x in va]} vs {['%.0f' % x for x in vb]}")
# Sifting trains fewer samples than it reads: samples seen per second is the
# rate at which it gets through an epoch.
if "sift" in only and "distill" in only:
    seen = [json.load(open(f"{out}/sift-vitkd-{r}/result.json")) for r in range(reps)]
    seen = [j["images_per_second"] * j["samples_seen"] / j["samples_trained"] for j in seen]
    ms, (mb, _) = statistics.median(seen), med("distill-pytorch")
    print(f"{'  same, samples seen per second':<44}{ms:12.1f}{mb:15.1f}{ms / mb:8.2f}   runs {['%.0f' % x for x in seen]}")
if "scaling" in only and "teacher" in only:
    (m1, v1), (m2, v2) = med("teacher1-vitkd"), med("teacher-vitkd")
    print(f"vitkd teacher, 1 rank {m1:.1f} img/s, 2 ranks {m2:.1f} img/s: weak-scaling efficiency {m2 / (2 * m1):.3f}")
PY
