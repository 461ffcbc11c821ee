#!/usr/bin/env bash
# Sifting benchmark: Fashion-MNIST distillation at 2 ranks, with and
# without sifting, the same number of samples seen (train.epochs), the same
# teacher, seeds and schedule. Reports wall time and student test top-1 per
# variant and the change against no sifting.
#   jobs/bench/sift.sh [EPOCHS] [TEACHER.h5]
#   VARIANTS="0 1 2" jobs/bench/sift.sh 7 ...   runs only those variants (0 = none,
#   1 = ce beta 0.5, 2 = ce beta 1, 3 = kd beta 0.5, 4 = kd beta 1, 5 = scope "teacher"
#   ce beta 2, 6 = scope "teacher" ce beta 1); 0 is the baseline the others are
#   compared with, so keep it in. Variants 1-4 skip unkept samples (scope
#   "sample", the published rule); 5-6 train every sample and give only the kept
#   ones the teacher (docs/sifting.md).
# Needs a teacher (default runs/fmnist-teacher/checkpoint.h5, from
# `mpirun -n 2 build/vitkd train inputs/fmnist-teacher.toml`).
set -euo pipefail
cd "$(dirname "$0")/../.."
source jobs/env.sh
E=${1:-3}
TEACHER=${2:-runs/fmnist-teacher/checkpoint.h5}
NP=${NP:-2}
DELAY=${DELAY:-200}   # optimizer steps before sifting starts (~0.4 epoch at global batch 128)
OUT=${OUT:-runs/bench-sift}
mkdir -p "$OUT"
[ -f "$TEACHER" ] || { echo "no teacher checkpoint at $TEACHER" >&2; exit 2; }
variants=(
  "none|"
  "ce beta=0.5|--set sift.enabled=true --set sift.criterion=ce --set sift.beta=0.5"
  "ce beta=1|--set sift.enabled=true --set sift.criterion=ce --set sift.beta=1"
  "kd beta=0.5|--set sift.enabled=true --set sift.criterion=kd --set sift.beta=0.5"
  "kd beta=1|--set sift.enabled=true --set sift.criterion=kd --set sift.beta=1"
  "T ce beta=2|--set sift.enabled=true --set sift.scope=teacher --set sift.beta=2"
  "T ce beta=1|--set sift.enabled=true --set sift.scope=teacher --set sift.beta=1"
)
read -r -a pick <<< "${VARIANTS:-${!variants[*]}}"
for i in "${pick[@]}"; do
  label=${variants[$i]%%|*}
  sets=${variants[$i]#*|}
  dir="$OUT/v$i"
  # shellcheck disable=SC2086
  mpirun -n "$NP" build/vitkd train inputs/fmnist-distill.toml --set run.out_dir="$dir" \
    --set checkpoint.resume=never --set train.epochs="$E" --set teacher.checkpoint="$TEACHER" \
    --set sift.delay="$DELAY" --set train.eval_every_epochs=0 $sets > "$dir.log" 2>&1 \
    || { echo "run failed: $label (see $dir.log)"; exit 1; }
  echo "$label: done ($dir)"
done
labels=()
for i in "${pick[@]}"; do labels+=("$i|${variants[$i]%%|*}"); done
/usr/bin/python3 - "$OUT" "${labels[@]}" <<'PY'
import json, sys
out, picked = sys.argv[1], [a.split("|", 1) for a in sys.argv[2:]]
labels = [l for _, l in picked]
rows = [json.load(open(f"{out}/v{i}/result.json")) for i, _ in picked]
base = rows[0]
def wall(r):  # training wall time, the final evaluation excluded
    return r["train_seconds"] - r["phase_seconds_rank0"][-1]
print(f"{'variant':<14}{'train s':>9}{'vs none':>9}{'top-1':>8}{'Δ pts':>8}{'kept':>7}{'teacher fwd':>13}"
      f"{'trained':>9}{'seen':>9}")
for l, r in zip(labels, rows):
    t = wall(r)
    print(f"{l:<14}{t:9.1f}{t / wall(base) - 1:+9.1%}{r['test_top1']:8.4f}"
          f"{100 * (r['test_top1'] - base['test_top1']):+8.2f}{r['kept_fraction']:7.2f}"
          f"{r['teacher_forwards']:13d}{r['samples_trained']:9d}{r['samples_seen']:9d}")
PY
