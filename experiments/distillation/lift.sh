#!/usr/bin/env bash
# Does distillation pay? The lift of the shipped student recipe
# (inputs/fmnist-distill.toml: ViT dim 96, depth 4, 32 epochs, augmentation)
# distilled from an ensemble teacher through a teacher-view cache, against the
# same student trained alone (experiments/results.md, "Distillation from an ensemble of the student itself").
#
# Stages, each skipped when its result already exists (so the job can be
# stopped and run again: a stopped training run resumes from its checkpoint):
#   1. members: the ensemble's members, the student recipe trained alone
#      (run.mode = "teacher") for MEMBER_EPOCHS epochs at seeds MEMBERS;
#   2. cache:   `vitkd teacher-cache` with teacher.checkpoint = [the members],
#      CACHE_EPOCHS epochs of views at seed CACHE_SEED; it logs the
#      ensemble's own test top-1;
#   3. alone:   the student alone at seeds SEEDS (the baseline);
#   4. distill: the student distilled from the cache at seeds SEEDS
#      (distill.teacher_cache = true: no teacher forward pass);
#   5. sift:    (not in the default STAGES) the student of seed SIFT_SEED
#      distilled from the live ensemble (no cache), without and with sifting
#      of the teacher's samples (sift.scope = "teacher", beta SIFT_BETAS, delay 200):
#      what sifting saves when the teacher runs live;
#   6. report:  experiments/distillation/lift.py: the lift at equal epochs and at equal wall
#      time (the cache's pass amortised over the students it serves), sifting
#      when stage 5 ran, a figure and the tables, into OUT/lift.md and OUT/lift.png.
#   experiments/distillation/lift.sh                  (needs build/vitkd and data/fmnist.h5)
# Environment:
#   OUT=runs/lift      where every run, its log and the report go
#   MEMBERS="7 8 9"    seeds of the ensemble's members
#   MEMBER_EPOCHS=64   train.epochs of the members (the students keep the config's 32);
#                      0.4.2's teacher was MEMBERS="4 5 6" MEMBER_EPOCHS=32
#   SEEDS="2 3"        seeds of the students compared
#   CACHE_SEED=1       seed of the cached views
#   CACHE_EPOCHS=32    epochs of views (the students' train.epochs)
#   NP=2               ranks of every run
#   SIFT_SEED=2        seed of the sifting comparison
#   SIFT_BETAS=2       the sifting runs' betas (sift-s<N>/ for 2, sift-b<B>-s<N>/ otherwise)
#   STAGES="members cache alone distill report"   (add "sift" for stage 5)
# On 2 cores of an AMD EPYC (AVX512_BF16), each 64-epoch member takes about
# 26 minutes, the cache of 3 members 10, each 32-epoch student 13 (the default
# stages: about 2 h 20 min; the sift stage, a live ensemble, about 40 more).
set -euo pipefail
cd "$(dirname "$0")/../.."
source jobs/env.sh
OUT=${OUT:-runs/lift}
MEMBERS=${MEMBERS:-7 8 9}
MEMBER_EPOCHS=${MEMBER_EPOCHS:-64}
SEEDS=${SEEDS:-2 3}
CACHE_SEED=${CACHE_SEED:-1}
CACHE_EPOCHS=${CACHE_EPOCHS:-32}
NP=${NP:-2}
SIFT_SEED=${SIFT_SEED:-2}
SIFT_BETAS=${SIFT_BETAS:-2}
STAGES=${STAGES:-members cache alone distill report}
VITKD=build/vitkd
CONFIG=inputs/fmnist-distill.toml
[ -x "$VITKD" ] || { echo "no $VITKD; build it first (jobs/build.sh)" >&2; exit 2; }
[ -f data/fmnist.h5 ] || { echo "no data/fmnist.h5; make it with: $VITKD prepare fashion-mnist --out data/fmnist.h5" >&2; exit 2; }
mkdir -p "$OUT"
CACHE=$OUT/ensemble-views.h5

has() { [[ " $STAGES " == *" $1 "* ]]; }
# train NAME ARGS...: one training run into OUT/NAME, unless it has finished.
train() {
  local name=$1; shift
  if [ -f "$OUT/$name/result.json" ]; then echo "lift: $name: done"; return; fi
  echo "lift: $name: $(date -u +%H:%M:%S) -> $OUT/$name.log"
  mpirun -n "$NP" --bind-to none "$VITKD" train "$CONFIG" --set run.out_dir="$OUT/$name" "$@" \
    >> "$OUT/$name.log" 2>&1 || { echo "lift: $name failed (exit $?); see $OUT/$name.log" >&2; exit 1; }
  tail -n 3 "$OUT/$name.log"
}

members=()
for s in $MEMBERS; do members+=("\"$OUT/member-s$s/checkpoint.h5\""); done
TEACHERS="[$(IFS=,; echo "${members[*]}")]"

if has members; then
  for s in $MEMBERS; do train "member-s$s" --set run.mode=teacher --set run.seed="$s" --set train.epochs="$MEMBER_EPOCHS"; done
fi
if has cache; then
  if [ -f "$CACHE" ]; then echo "lift: cache: done"; else
    echo "lift: cache: $(date -u +%H:%M:%S) -> $OUT/cache.log"
    mpirun -n "$NP" --bind-to none "$VITKD" teacher-cache "$CONFIG" --set "teacher.checkpoint=$TEACHERS" \
      --set run.seed="$CACHE_SEED" --set distill.cache_epochs="$CACHE_EPOCHS" \
      --set distill.teacher_cache_file="$CACHE" > "$OUT/cache.log" 2>&1 \
      || { echo "lift: cache failed; see $OUT/cache.log" >&2; exit 1; }
    tail -n 2 "$OUT/cache.log"
  fi
fi
for s in $SEEDS; do
  if has alone; then train "alone-s$s" --set run.mode=teacher --set run.seed="$s"; fi
  if has distill; then
    train "distill-s$s" --set run.seed="$s" --set "teacher.checkpoint=$TEACHERS" \
      --set distill.teacher_cache=true --set distill.teacher_cache_file="$CACHE" \
      --set distill.eval_agreement=true
  fi
done
if has sift; then
  LIVE=(--set run.seed="$SIFT_SEED" --set "teacher.checkpoint=$TEACHERS")
  train "live-s$SIFT_SEED" "${LIVE[@]}"
  for b in $SIFT_BETAS; do
    name=sift-b$b-s$SIFT_SEED; [ "$b" = 2 ] && name=sift-s$SIFT_SEED
    train "$name" "${LIVE[@]}" --set sift.enabled=true --set sift.scope=teacher \
      --set sift.beta="$b" --set sift.delay=200
  done
fi
if has report; then
  /usr/bin/python3 experiments/distillation/lift.py --runs "$OUT" --seeds "$SEEDS" --sift-seed "$SIFT_SEED" --cache-log "$OUT/cache.log" \
    --out "$OUT/lift.md" --figure "$OUT/lift.png"
fi
