#!/usr/bin/env bash
# Does distillation pay? The pre-registered comparison of experiments/learning-log.md
# (2026-12-02, issue 36): arms A (student alone, 32 epochs), B (A with label
# smoothing 0.1), C (distilled from the convnet teacher, DeiT hard through the
# distillation token), Cs (C with the soft loss), S (C with sifting, scope
# "sample", beta 2: amendment of 2026-12-03), D (distilled from a ViT
# teacher, when VIT_TEACHER is given), E (student alone, 64 epochs), at seeds
# SEEDS, seed by seed, the arms' order rotated per seed. Every run evaluates
# on the validation split and reads the test split once (test_predictions.json).
# Each stage is skipped when its result exists (stop and rerun: a stopped
# training run resumes from its checkpoint). Every finished run is kept small
# under KEEP (experiments/distillation/keep_run.py: result.json, the test predictions, the
# median step time and the CPU; commit them), and so is the convnet teacher:
# a fresh checkout restores them and runs only what is missing, so the seeds
# can run in separate sessions, each seed's arms on one machine (arm D may
# follow on another: experiments/learning-log.md, 2026-12-03) and in one precision,
# the one "auto" picks where the seed's first run starts (bf16 with native
# bf16, fp32 without: the amendment of 2026-12-03, fourth session).
# To free the machine, stop a run at a checkpoint: kill -USR1 <mpirun's pid>
# (vitkd writes checkpoint.h5 and exits with 75, and so does this script);
# never SIGTSTP, whose paused minutes would count as training time.
#   experiments/distillation/compare.sh                 (needs build/vitkd)
#   ESTIMATE=1 experiments/distillation/compare.sh      one epoch of A, of C and of S (sifting from its first step) into
#                                   OUT/estimate/, and the whole comparison's duration from them
#                                   (nothing else runs; any CPU, in the precision auto picks there)
# Environment:
#   OUT=runs/compare  SEEDS="11 12 13 14"  NP=2  ARMS="A B C Cs S D E"  KEEP=experiments/distillation/results/compare
#   DATA=data/fmnist-val.h5 (made here when missing: --val-fraction 0.1 --val-seed 1)
#   TEACHER=teachers/fmnist-cnn.pt (made here when missing: experiments/distillation/teacher_cnn.py, 30 epochs; kept in experiments/distillation/results/compare)
#   VIT_TEACHER=       a vitkd checkpoint for arm D, chosen on the validation split (default:
#                      KEEP/teacher-vit.h5, kept by experiments/distillation/teacher_vit.sh); D is skipped (with a
#                      line) without it
#   EXTRA="--set train.max_steps=3"   keys added to every run (a rehearsal; not for the rule)
# Report: OUT/compare.md, experiments/distillation/lift.py per comparison (C-A, C-B, C-E, Cs-A, S-C, D-A); the
# README's table: experiments/distillation/compare_table.py --write (from KEEP).
# Duration (ESTIMATE=1, one epoch each, 2026-12-02, the 2 cores shared with other work): about
# 4.1 h per seed, 16.5 h for the 4 seeds with D and S; on a quiet machine about 7.7 h
# (experiments/learning-log.md; S at two thirds of C, as measured in fp32 on 2026-12-03: -37 %). In fp32
# on a 2-core AVX2-only EPYC (2026-12-03): about 5.4 h per seed without D, 22-27 h in all. Measured:
# seed 12's six arms without D in 73 min (bf16, 2 quiet cores of an AMD EPYC with AVX512_BF16,
# 2026-12-04; experiments/learning-log.md). The whole comparison, 2026-12-03 to 12-06 (vitkd 0.4.7,
# LibTorch 1.13.0, OpenMPI 4.1): a seed's seven arms about 102 min of training in bf16 on that
# EPYC (D 30 of them), seed 11's about 5.3 h in fp32; with the convnet teacher (68 min) and
# experiments/distillation/teacher_vit.sh's two candidates (236 min), about 12 h in bf16 on that machine.
set -euo pipefail
cd "$(dirname "$0")/../.."
source jobs/env.sh
OUT=${OUT:-runs/compare}
# The rule's seeds and arms: experiments/distillation/compare_table.py holds them once (it also writes the README's table).
SEEDS=${SEEDS:-$(/usr/bin/python3 experiments/distillation/compare_table.py --print seeds)}
NP=${NP:-2}
ARMS=${ARMS:-$(/usr/bin/python3 experiments/distillation/compare_table.py --print arms)}
DATA=${DATA:-data/fmnist-val.h5}
TEACHER=${TEACHER:-teachers/fmnist-cnn.pt}
KEEP=${KEEP:-experiments/distillation/results/compare}
VIT_TEACHER=${VIT_TEACHER:-}
read -r -a EXTRA <<< "${EXTRA:-}"
[ -n "$VIT_TEACHER" ] || [ ! -f "$KEEP/teacher-vit.h5" ] || VIT_TEACHER=$KEEP/teacher-vit.h5
VITKD=build/vitkd
CONFIG=inputs/fmnist-distill-cnn.toml
[ -x "$VITKD" ] || { echo "no $VITKD; build it first (jobs/build.sh)" >&2; exit 2; }
mkdir -p "$OUT"
[ -f "$DATA" ] || "$VITKD" prepare fashion-mnist --out "$DATA" --val-fraction 0.1 --val-seed 1
# A seed's first run fixes its precision: the one "auto" picks here (bf16 with native bf16, fp32
# without; experiments/learning-log.md, 2026-12-03, fourth session), passed to every arm of the seed.
if "$VITKD" bench gemm --auto-only | grep -q '"auto" chooses bf16'; then HERE_PRECISION=bf16; else HERE_PRECISION=fp32; fi
mkdir -p "$KEEP"
if [ ! -f "$TEACHER" ] && [ -f "$KEEP/teacher-cnn.pt" ]; then
  mkdir -p "$(dirname "$TEACHER")"; cp "$KEEP/teacher-cnn.pt" "$TEACHER"
fi
if [ ! -f "$TEACHER" ]; then
  nice -n 19 /usr/bin/python3 experiments/distillation/teacher_cnn.py --data "$DATA" --out "$TEACHER" \
    --json "$OUT/teacher-cnn.json" --epochs 30 --batch 256 --lr 0.2
  cp "$TEACHER" "$KEEP/teacher-cnn.pt"; cp "$OUT/teacher-cnn.json" "$KEEP/teacher-cnn.json"
fi
# Runs finished in an earlier session, kept small: restored, so that train() skips them.
for kept in "$KEEP"/*/result.json; do
  [ -f "$kept" ] || continue
  name=$(basename "$(dirname "$kept")")
  [ -f "$OUT/$name/result.json" ] || { mkdir -p "$OUT/$name"; cp "$KEEP/$name"/*.json "$OUT/$name/"; }
done

# arm_args ARM: the keys over CONFIG that make the arm (experiments/learning-log.md's table).
arm_args() {
  local alone=(--set run.mode=teacher --set model.dist_token=false --set 'teacher.torchscript=""')
  case $1 in
    A) ARGS=("${alone[@]}") ;;
    B) ARGS=("${alone[@]}" --set train.label_smoothing=0.1) ;;
    C) ARGS=(--set "teacher.torchscript=$TEACHER") ;;
    Cs) ARGS=(--set "teacher.torchscript=$TEACHER" --set distill.kind=soft) ;;
    S) ARGS=(--set "teacher.torchscript=$TEACHER" --set sift.enabled=true --set 'sift.scope="sample"'
             --set sift.beta=2) ;;
    D) ARGS=(--set 'teacher.torchscript=""' --set "teacher.checkpoint=$VIT_TEACHER") ;;
    E) ARGS=("${alone[@]}" --set train.epochs=64) ;;
    F*) sift_point_args "$1" ;;
    *) echo "compare: unknown arm '$1' (A B C Cs S D E, or a sifting point F<S|I|T>b<beta>[d<delay>])" >&2; exit 2 ;;
  esac
  ARGS+=(--set "data.path=$DATA")
}
# sift_point_args F<S|I|T>b<BETA>[d<DELAY>]: a point of the sifting frontier (experiments/sifting/):
# C with sifting, scope "sample" and the separate pass (S), scope "sample" ranked in the training
# forward (I), or scope "teacher" (T), at sift.beta BETA and sift.delay DELAY (default SIFT_DELAY, else 1000).
sift_point_args() {
  [[ $1 =~ ^F([SIT])b([0-9.]+)(d([0-9]+))?$ ]] || { echo "compare: unknown sifting point '$1' (e.g. FSb0.5, FIb1d500)" >&2; exit 2; }
  local how
  case ${BASH_REMATCH[1]} in
    S) how=(--set 'sift.scope="sample"' --set 'sift.pass="separate"') ;;
    I) how=(--set 'sift.scope="sample"' --set 'sift.pass="in_forward"') ;;
    T) how=(--set 'sift.scope="teacher"') ;;
  esac
  ARGS=(--set "teacher.torchscript=$TEACHER" --set sift.enabled=true "${how[@]}" --set "sift.beta=${BASH_REMATCH[2]}"
        --set "sift.delay=${BASH_REMATCH[4]:-${SIFT_DELAY:-1000}}")
}
# seed_precision SEED: the precision of the seed's kept runs (one, by the rule), else HERE_PRECISION.
seed_precision() {
  local p
  p=$(/usr/bin/python3 -c 'import glob, json, sys
print(" ".join(sorted({json.load(open(f))["compute"] for f in glob.glob(sys.argv[1] + "/*-s" + sys.argv[2] + "/result.json")})))' \
      "$KEEP" "$1")
  case $p in
    "") echo "$HERE_PRECISION" ;;
    bf16|fp32) echo "$p" ;;
    *) echo "compare: seed $1's kept runs differ in precision ($p); the rule runs a seed in one" >&2; exit 2 ;;
  esac
}
# train NAME ARM ARGS...: one run into OUT/NAME, unless it has finished.
train() {
  local name=$1 arm=$2; shift 2
  if [ -f "$OUT/$name/result.json" ]; then echo "compare: $name: done"; return; fi
  arm_args "$arm"
  mkdir -p "$(dirname "$OUT/$name")"
  echo "compare: $name: $(date -u +%H:%M:%S) -> $OUT/$name.log"
  local rc=0
  mpirun -n "$NP" --bind-to none "$VITKD" train "$CONFIG" --set run.out_dir="$OUT/$name" "${ARGS[@]}" "$@" \
    "${EXTRA[@]}" >> "$OUT/$name.log" 2>&1 || rc=$?
  if [ "$rc" = 75 ]; then
    echo "compare: $name: stopped at its checkpoint (SIGUSR1 or SIGTERM); run experiments/distillation/compare.sh again to resume it" >&2
    exit 75
  fi
  [ "$rc" = 0 ] || { echo "compare: $name failed (exit $rc); see $OUT/$name.log" >&2; exit 1; }
  tail -n 1 "$OUT/$name.log"
  [ -n "${ESTIMATE:-}" ] || /usr/bin/python3 experiments/distillation/keep_run.py "$OUT/$name" "$KEEP/$name"
}

if [ -n "${ESTIMATE:-}" ]; then
  # One epoch of the cheapest (A) and the dearest 32-epoch arm (C, the live teacher), and one of S
  # sifting from its first step (its steady state; in the arm it starts after sift.delay steps).
  train estimate/A-1ep A --set train.epochs=1 --set run.seed=11
  train estimate/C-1ep C --set train.epochs=1 --set run.seed=11
  train estimate/S-1ep S --set train.epochs=1 --set run.seed=11 --set sift.delay=0
  /usr/bin/python3 - "$OUT/estimate" "$SEEDS" "$ARMS" <<'PY'
import json, sys
d, seeds, arms = sys.argv[1], sys.argv[2].split(), sys.argv[3].split()
a = json.load(open(f"{d}/A-1ep/result.json"))["evaluations"][-1]["train_seconds"]
rc = json.load(open(f"{d}/C-1ep/result.json"))
c = rc["evaluations"][-1]["train_seconds"]
teacher = rc["phase_seconds_rank0"][1]  # timing.h5's phases: data_wait, teacher_forward, ...
rs = json.load(open(f"{d}/S-1ep/result.json"))
sv = rs["evaluations"][-1]["train_seconds"]
# On a shared machine one run can be slowed more than the other: C's epoch without its teacher
# phase is the same work as A's epoch, so A's is taken as the smaller of the two.
print(f"measured: A {a:.0f} s, C {c:.0f} s of which the teacher's forward passes {teacher:.0f} s, "
      f"S {sv:.0f} s sifting from its first step (kept {rs['kept_fraction']:.2f}; S/C {sv / c:.2f})")
a = min(a, c - teacher)
# Per arm: epochs x the measured epoch (A's for the arms without a teacher, C's with one; D's ViT
# teacher is taken as dear as C's), plus 32 evaluations of ~2 % (not measured separately). S runs
# C's epochs until sift.delay (its default, 1000 steps; C's one epoch gives the steps an epoch), then its own.
unsifted = min(32, 1000 / rc["steps"])
cost = {"A": 32 * a, "B": 32 * a, "C": 32 * c, "Cs": 32 * c, "S": unsifted * c + (32 - unsifted) * sv,
        "D": 32 * c, "E": 64 * a}
print(f"S against C over 32 epochs: {100 * (cost['S'] / cost['C'] - 1):+.0f} % (the amendment of 2026-12-03 "
      "predicts -30 to -38 %)")
total = len(seeds) * sum(cost[x] for x in arms) * 1.02
print(f"one epoch: A {a:.0f} s, C {c:.0f} s (training time without evaluation); per seed "
      + ", ".join(f"{x} {cost[x] / 60:.0f} min" for x in arms)
      + f"; {len(seeds)} seeds: about {total / 3600:.1f} h")
PY
  exit 0
fi

# The rule runs a seed's arms in one session on one machine (its time comparisons pair them): say so
# before a seed is finished on another CPU than the one its kept runs name (experiments/distillation/compare_table.py
# then reports those times as not compared).
here=$(/usr/bin/python3 -c 'import sys; sys.path.insert(0, "experiments/distillation"); import keep_run; print(keep_run.cpu_model())')
for s in $SEEDS; do
  todo=0
  # D is read only at the end of training, never against time: it may run anywhere (2026-12-03).
  for arm in $ARMS; do [ "$arm" = D ] || [ -f "$KEEP/$arm-s$s/result.json" ] || todo=1; done
  [ "$todo" = 1 ] || continue
  # The times pair with C: its kept run is the reference where there is one (a seed's
  # other kept runs, e.g. the frontier's delay stage, may have run elsewhere).
  refs=("$KEEP"/*-s"$s"/timing-summary.json)
  [ ! -f "$KEEP/C-s$s/timing-summary.json" ] || refs=("$KEEP/C-s$s/timing-summary.json")
  for kept in "${refs[@]}"; do
    [ -f "$kept" ] || continue
    there=$(/usr/bin/python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["cpu"])' "$kept")
    if [ "$there" != "$here" ]; then
      echo "compare: seed $s: $(basename "$(dirname "$kept")") ran on '$there', this CPU is '$here':" \
           "the seed's time comparisons with the arms run here will not be made" >&2
      break
    fi
  done
done

order=($ARMS)
# The rotation is the seed's place i in the rule's list (seed 11 is 0), not in SEEDS: a session that
# runs SEEDS="12" alone runs seed 12's arms in seed 12's order.
rule_seeds=($(/usr/bin/python3 experiments/distillation/compare_table.py --print seeds))
for s in $SEEDS; do
  n=${#order[@]}
  i=0
  while [ "$i" -lt "${#rule_seeds[@]}" ] && [ "${rule_seeds[$i]}" != "$s" ]; do i=$((i + 1)); done
  prec=$(seed_precision "$s")
  echo "compare: seed $s ($prec): arms in the order $(for ((k = 0; k < n; ++k)); do printf '%s ' "${order[$(((k + i) % n))]}"; done)"
  for ((k = 0; k < n; ++k)); do
    arm=${order[$(((k + i) % n))]}
    [ ! -f "$OUT/$arm-s$s/result.json" ] || { echo "compare: $arm-s$s: done"; continue; }
    if [ "$arm" = D ] && [ -z "$VIT_TEACHER" ]; then echo "compare: D-s$s: not run (no VIT_TEACHER)"; continue; fi
    if [ "$prec" = bf16 ] && [ "$HERE_PRECISION" != bf16 ]; then
      echo "compare: seed $s runs in bf16 (its kept runs) and this CPU has no native bf16 (vitkd bench gemm):" \
           "run it on a CPU with AVX512_BF16 or AMX, or start another seed (SEEDS=...)" >&2
      exit 2
    fi
    train "$arm-s$s" "$arm" --set run.seed="$s" --set "precision.compute=\"$prec\""
  done
done

# experiments/distillation/lift.py per comparison: X's runs as distill-s<N>, Y's as alone-s<N>.
report() {
  local x=$1 y=$2; shift 2
  local dir=$OUT/cmp-$x-$y
  for s in $SEEDS; do [ -f "$OUT/$x-s$s/result.json" ] && [ -f "$OUT/$y-s$s/result.json" ] || { echo "compare: $x-$y: not all runs exist"; return; }; done
  rm -rf "$dir"; mkdir -p "$dir"
  for s in $SEEDS; do ln -s "../$x-s$s" "$dir/distill-s$s"; ln -s "../$y-s$s" "$dir/alone-s$s"; done
  { echo "## $x against $y"; echo; /usr/bin/python3 experiments/distillation/lift.py --runs "$dir" --seeds "$SEEDS" --live "$@" \
      --figure "$dir/lift.png" || echo "(lift.py refused: see above)"; echo; } >> "$OUT/compare.md"
}
: > "$OUT/compare.md"
report C A; report C B; report C E --epochs-may-differ; report Cs A; report S C; report D A
echo "compare: wrote $OUT/compare.md; the README's table: /usr/bin/python3 experiments/distillation/compare_table.py --write"
