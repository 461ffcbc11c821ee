#!/usr/bin/env bash
# The ViT teacher of the comparison's arm D (issue 36, item 2; the rule in
# experiments/learning-log.md, 2026-12-03): candidates written down before any of
# them ran, each trained from inputs/fmnist-teacher.toml on the training part
# of data/fmnist-val.h5, evaluated on its validation split every epoch, the
# test split read once at the end. The candidate with the highest final
# validation top-1 is the teacher: its weights are kept (experiments/distillation/keep_run.py
# --weights) as experiments/distillation/results/compare/teacher-vit.h5, which experiments/distillation/compare.sh takes for
# arm D. Every finished candidate is kept small under KEEP (result.json with
# the curve, the test predictions, the median step time and the CPU; commit
# them), and its weights as KEEP/NAME.weights.h5 until the choice, which
# makes the chosen one's CHOSEN (commit it) and deletes the others (a fresh
# checkout has a candidate's weights only where they were committed), so a
# fresh checkout runs only what is missing; a stopped candidate resumes from
# its checkpoint when OUT survives. To free the machine, stop it at a checkpoint:
# kill -USR1 <mpirun's pid> (exit 75; the rerun resumes it).
#   experiments/distillation/teacher_vit.sh             (needs build/vitkd; any CPU, in the precision auto picks)
# Environment: OUT=runs/teacher-vit  KEEP=experiments/distillation/results/teacher-vit  NP=2
#   CANDIDATES="V2 V1" (those to run now; the choice is made once every candidate is kept)
#   DATA=data/fmnist-val.h5 (made here when missing: --val-fraction 0.1 --val-seed 1)
#   CHOSEN=experiments/distillation/results/compare/teacher-vit.h5  EXTRA="--set train.max_steps=3" (a rehearsal; not for the rule)
# Duration: V2 about 45 min and V1 about 100 min on 2 cores with native bf16 (from the
# 2.7M teacher's 49.6 min for 32 epochs, 2026-11-30); in fp32 on a 2-core AVX2-only
# EPYC about 2.7 h and 5.8 h (169 img/s for the 2.7M recipe, 2026-12-03).
set -euo pipefail
cd "$(dirname "$0")/../.."
source jobs/env.sh
OUT=${OUT:-runs/teacher-vit}
KEEP=${KEEP:-experiments/distillation/results/teacher-vit}
# The candidates of the rule (held once in experiments/distillation/compare_table.py): the choice waits for all of them.
ALL=$(/usr/bin/python3 experiments/distillation/compare_table.py --print vit-candidates)
CANDIDATES=${CANDIDATES:-$ALL}    # those to run now (a subset: the rest in a later session)
NP=${NP:-2}
DATA=${DATA:-data/fmnist-val.h5}
CHOSEN=${CHOSEN:-experiments/distillation/results/compare/teacher-vit.h5}
read -r -a EXTRA <<< "${EXTRA:-}"
VITKD=build/vitkd
[ -x "$VITKD" ] || { echo "no $VITKD; build it first (jobs/build.sh)" >&2; exit 2; }
[ -f "$DATA" ] || "$VITKD" prepare fashion-mnist --out "$DATA" --val-fraction 0.1 --val-seed 1
mkdir -p "$OUT" "$KEEP"

# candidate_args NAME: the keys over inputs/fmnist-teacher.toml (experiments/learning-log.md's table).
candidate_args() {
  local common=(--set "data.path=\"$DATA\"" --set 'data.eval_split="val"' --set model.drop_path=0.1
                --set train.epochs=64 --set run.seed=1)
  case $1 in
    V1) ARGS=("${common[@]}" --set model.dim=192 --set model.depth=6 --set model.heads=3) ;;
    V2) ARGS=("${common[@]}" --set model.dim=128 --set model.depth=6 --set model.heads=4) ;;
    *) echo "teacher_vit: unknown candidate '$1' (V1 V2)" >&2; exit 2 ;;
  esac
}

for c in $CANDIDATES; do
  if [ -f "$KEEP/$c/result.json" ]; then echo "teacher_vit: $c: done (kept in $KEEP/$c)"; continue; fi
  candidate_args "$c"
  echo "teacher_vit: $c: $(date -u +%H:%M:%S) -> $OUT/$c.log"
  rc=0
  mpirun -n "$NP" --bind-to none "$VITKD" train inputs/fmnist-teacher.toml --set "run.out_dir=\"$OUT/$c\"" \
    "${ARGS[@]}" "${EXTRA[@]}" >> "$OUT/$c.log" 2>&1 || rc=$?
  if [ "$rc" = 75 ]; then
    echo "teacher_vit: $c: stopped at its checkpoint (SIGUSR1 or SIGTERM); run experiments/distillation/teacher_vit.sh again to resume it" >&2
    exit 75
  fi
  [ "$rc" = 0 ] || { echo "teacher_vit: $c failed (exit $rc); see $OUT/$c.log" >&2; exit 1; }
  tail -n 1 "$OUT/$c.log"
  # Every finished candidate's weights are kept beside its folder until the choice: OUT (runs/,
  # ignored) does not outlive a fresh checkout, and the choice may come sessions later.
  /usr/bin/python3 experiments/distillation/keep_run.py "$OUT/$c" "$KEEP/$c" --weights "$KEEP/$c.weights.h5"
done

# The choice: the highest final validation top-1 among all the rule's candidates, once all are kept.
missing=""
for c in $ALL; do [ -f "$KEEP/$c/result.json" ] || missing+=" $c"; done
if [ -n "$missing" ]; then
  echo "teacher_vit: not every candidate has run (missing:$missing): no choice yet"
  exit 0
fi
/usr/bin/python3 - "$KEEP" "$ALL" > "$OUT/choice.txt" <<'PY'
import json, sys
keep, names = sys.argv[1], sys.argv[2].split()
rows = []
for n in names:
    r = json.load(open(f"{keep}/{n}/result.json"))
    val = [e["val_top1"] for e in r["evaluations"] if "val_top1" in e]
    rows.append((val[-1], n, r["test_top1"], r["parameters"], r["compute"], r["train_seconds"]))
for v, n, t, p, c, s in rows:
    print(f"# {n}: final val top-1 {v:.4f}, test top-1 {t:.4f} (read once), {p} parameters, {c}, {s / 60:.0f} min")
print(max(rows)[1])
PY
grep '^#' "$OUT/choice.txt"
best=$(tail -n 1 "$OUT/choice.txt")
if [ -f "$KEEP/$best.weights.h5" ]; then
  mv "$KEEP/$best.weights.h5" "$CHOSEN"
  rm -f "$KEEP"/*.weights.h5    # the candidates not chosen: their curves stay, their weights go
  echo "teacher_vit: $best chosen on the validation split -> $CHOSEN (experiments/distillation/compare.sh takes it for arm D; commit it)"
elif [ -f "$OUT/$best/checkpoint.h5" ]; then
  /usr/bin/python3 experiments/distillation/keep_run.py "$OUT/$best" "$KEEP/$best" --weights "$CHOSEN"
  echo "teacher_vit: $best chosen on the validation split -> $CHOSEN (experiments/distillation/compare.sh takes it for arm D; commit it)"
elif [ -f "$CHOSEN" ]; then
  echo "teacher_vit: $best chosen; $CHOSEN already kept"
else
  echo "teacher_vit: $best chosen, but its weights ($KEEP/$best.weights.h5, $OUT/$best/checkpoint.h5) are gone:" \
       "train it again (mv $KEEP/$best $KEEP/$best.first; CANDIDATES=$best experiments/distillation/teacher_vit.sh; its curve should match the first's)" >&2
  exit 1
fi
