#!/usr/bin/env bash
# Quickstart: from a fresh Debian 12 machine to a distilled student, on 2 ranks.
#   set-up -> build -> prepare Fashion-MNIST -> train a teacher -> distil a
#   student -> summary table.
# The schedules are shortened (QUICK_TEACHER_EPOCHS, QUICK_STUDENT_EPOCHS, 1
# each by default) so the training part takes a few minutes on 2 cores; the
# full configurations are inputs/fmnist-teacher.toml and inputs/fmnist-distill.toml.
set -euo pipefail
cd "$(dirname "$0")/.."
NP=${NP:-2}
TE=${QUICK_TEACHER_EPOCHS:-1}
SE=${QUICK_STUDENT_EPOCHS:-1}
OUT=${OUT:-runs/quickstart}

t0=$(date +%s)
bash jobs/setup.sh
bash jobs/build.sh
t1=$(date +%s)
source jobs/env.sh
VITKD=build/vitkd
MPI=(mpirun -n "$NP")

[ -f data/fmnist.h5 ] || $VITKD prepare fashion-mnist --out data/fmnist.h5
t2=$(date +%s)
# Augmentation pays only on long schedules: the short ones train without it.
"${MPI[@]}" $VITKD train inputs/fmnist-teacher.toml --set train.epochs="$TE" --set data.augment=false \
  --set run.out_dir="$OUT/teacher" --set checkpoint.resume=never
t3=$(date +%s)
"${MPI[@]}" $VITKD train inputs/fmnist-distill.toml --set train.epochs="$SE" --set data.augment=false \
  --set run.out_dir="$OUT/student" --set checkpoint.resume=never --set teacher.checkpoint="$OUT/teacher/checkpoint.h5"
t4=$(date +%s)

/usr/bin/python3 - "$OUT" $((t1 - t0)) $((t2 - t1)) $((t3 - t2)) $((t4 - t3)) <<'PY'
import json, sys
out, setup, prep, tt, st = sys.argv[1], *map(int, sys.argv[2:])
t = json.load(open(f"{out}/teacher/result.json"))
s = json.load(open(f"{out}/student/result.json"))
print()
print(f"{'model':<10}{'parameters':>12}{'epochs':>8}{'test top-1':>12}{'img/s':>9}{'train s':>9}")
for name, r in (("teacher", t), ("student", s)):
    print(f"{name:<10}{r['parameters']:>12,}{r['epochs']:>8}{r['test_top1']:>12.4f}"
          f"{r['images_per_second']:>9.0f}{r['train_seconds']:>9.1f}")
print(f"\nstudent/teacher parameters: {s['parameters'] / t['parameters']:.3f}")
print(f"set-up + build: {setup} s; prepare: {prep} s; teacher job: {tt} s; distill job: {st} s; "
      f"quickstart after the build: {prep + tt + st} s")
print(f"outputs: {out}/teacher and {out}/student (checkpoint.h5, timing.h5, result.json)")
PY
# Where did the time go? (analysis/report.py writes report.md + figures beside each timing.h5)
for run in "$OUT/teacher" "$OUT/student"; do
  /usr/bin/python3 analysis/report.py "$run" > "$run/report.txt"
  echo "$run/report.md: $(grep -m1 '^Slowest phase' "$run/report.md"); $(grep -m1 '^Most imbalanced rank' "$run/report.md")"
done
