#!/usr/bin/env bash
# vitkd against timm at 224 x 224 on this CPU: ViT-B/16 distilled into
# ViT-S/16, and ViT-S/16 trained alone, 2 ranks, batch BATCH per rank,
# synthetic 224 x 224 x 3 data (10 classes, no augmentation).
#   jobs/bench/vs_timm.sh [ROUNDS] [STEPS]         (defaults 3 and 8; the README ran 3 7)
# Programs, run alternately, each ROUNDS times, each for STEPS steps:
#   vitkd-1.13      build/vitkd (Debian's LibTorch 1.13; jobs/build.sh)
#   vitkd-2.x       build-torch2/vitkd (PyPI's LibTorch 2.x; jobs/lanes/torch2.sh)
#   timm-eager      benchmarks/pytorch_baseline.py with --timm-student
#                   vit_small_patch16_224 (and --timm-teacher vit_base_patch16_224)
#                   in the venv of jobs/setup-torch2.sh: DDP over gloo,
#                   ZeroRedundancyOptimizer(AdamW), autocast, teacher eval + no_grad
#   timm-compiled   the same with torch.compile (its compilation falls in the
#                   warm-up steps, which the median leaves out)
# vitkd: model.preset "vit_s16" (teacher "vit_b16", random weights written by a
# one-step vitkd run), soft distillation, no distillation token, reading the
# HDF5 file as it trains (the timm side holds the split in memory).
# Both sides: the precision vitkd's precision.compute = "auto" picks on this
# CPU (PRECISION=bf16|fp32 forces one), 1 compute thread per rank, AdamW,
# gradient clipping 1.0. Step time = the median wall time of a step after
# WARMUP steps (rank 0's; a step ends in a collective); images/s = global
# batch / step time; MFU = images/s x the model's FLOPs per image (vitkd's
# count, the same models) / (its own LibTorch's bf16 or fp32 ceiling, the one
# vitkd keeps for this CPU at 2 ranks, per core, x 2 cores; timm's is that of
# the build on torch's LibTorch; see "The MFU ceilings" below).
# Environment: BUILDS (default "build,build-torch2"; the ones missing are
# skipped and named), PEERS (default "eager,compiled"), MODES (default
# "distill,student"), BATCH (16), WARMUP (3), OUT (runs/bench-vs-timm),
# PT2_PYTHON (the venv's python), VITKD_SET (configuration keys added to every
# vitkd run, e.g. 'precision.gather="fp32"' for the before of a change).
# Writes $OUT/summary.json (medians, ratios, MFU, CPU, versions) and prints a
# table; each run's log and result.json under $OUT/<mode>-<program>-<round>.
# About 12 minutes with 3 rounds of 7 steps on 2 cores of a Xeon with AMX (2026-12-02).
set -euo pipefail
cd "$(dirname "$0")/../.."
source jobs/env.sh
ROUNDS=${1:-3}
STEPS=${2:-8}
WARMUP=${WARMUP:-3}
BATCH=${BATCH:-16}
OUT=${OUT:-runs/bench-vs-timm}
read -r -a VSET <<< "${VITKD_SET:-}"
BUILDS=${BUILDS:-build,build-torch2}
PEERS=${PEERS:-eager,compiled}
MODES=${MODES:-distill,student}
NP=2
[ "$STEPS" -gt "$WARMUP" ] || { echo "vs_timm: STEPS ($STEPS) must exceed WARMUP ($WARMUP)" >&2; exit 2; }
mkdir -p "$OUT"
PT2_PYTHON=${PT2_PYTHON:-$(bash jobs/setup-torch2.sh | tail -1)/bin/python}
"$PT2_PYTHON" -c "import timm" 2>/dev/null || { echo "vs_timm: no timm in $PT2_PYTHON (jobs/setup-torch2.sh)" >&2; exit 2; }
IFS=, read -r -a BUILD_LIST <<< "$BUILDS"
VITKD=()
for b in "${BUILD_LIST[@]}"; do
  if [ -x "$b/vitkd" ]; then VITKD+=("$b"); else echo "vs_timm: $b/vitkd missing: skipped" >&2; fi
done
[ ${#VITKD[@]} -gt 0 ] || { echo "vs_timm: no vitkd build (jobs/build.sh)" >&2; exit 2; }
IFS=, read -r -a PEER_LIST <<< "$PEERS"
IFS=, read -r -a MODE_LIST <<< "$MODES"

GEMM=$("${VITKD[0]}/vitkd" bench gemm --millis 300)
if [ -z "${PRECISION:-}" ]; then
  PRECISION=$(sed -n 's/.*"auto" chooses \([a-z0-9]*\) here.*/\1/p' <<< "$GEMM")
fi
case $PRECISION in bf16) PT_PREC=() ;; fp32) PT_PREC=(--fp32) ;; *) echo "PRECISION must be bf16 or fp32" >&2; exit 2 ;; esac
printf '%s\n' "$GEMM" > "$OUT/gemm.txt"

DATA=$OUT/synthetic224.h5
[ -f "$DATA" ] || "${VITKD[0]}/vitkd" prepare synthetic --out "$DATA" --train $((NP * BATCH * STEPS)) --test 16 \
  --size 224 --channels 3 --classes 10 > "$OUT/prepare.log"
COMMON=("data.path=\"$DATA\"" data.batch_size="$BATCH" data.augment=false model.classes=10 model.dist_token=false
        checkpoint.resume=\"never\" train.final_eval=false train.eval_every_epochs=0 train.threads=1
        train.timing_every_steps=1 precision.compute=\"$PRECISION\" optim.warmup_steps=0 optim.grad_clip=1.0
        distill.kind=\"soft\")
sets() { for kv in "$@"; do printf -- '--set\n%s\n' "$kv"; done; }
# A run's figures are its result.json and timing.h5; the checkpoint every run
# writes at its end (250 MB for ViT-S/16 with its optimizer state) is dropped,
# or a few A/Bs fill tens of GB of disk.
drop_checkpoints() { rm -f "$1"/checkpoint*.h5; }
BASE=$OUT/base.toml  # every other key at its default; the presets set the models' shapes
printf '# jobs/bench/vs_timm.sh: the keys are given with --set\n[train]\nepochs = 1\nlog_every_steps = 1\n' > "$BASE"

# The teacher: ViT-B/16 with random weights, one step of a vitkd run.
TEACHER=$OUT/teacher-b16/checkpoint.h5
if [ ! -f "$TEACHER" ]; then
  mapfile -t S < <(sets "${COMMON[@]}" run.mode=\"teacher\" model.preset=\"vit_b16\" train.max_steps=1 data.batch_size=2 \
                        checkpoint.every_steps=0 run.out_dir=\"$OUT/teacher-b16\")
  mpirun -n "$NP" "${VITKD[0]}/vitkd" train "$BASE" "${S[@]}" > "$OUT/teacher-b16.log" 2>&1 ||
    { echo "vs_timm: the teacher run failed ($OUT/teacher-b16.log)" >&2; exit 1; }
fi

# The MFU ceilings, one per LibTorch: measured at the start of every benchmark
# the way vitkd keeps one (train.mfu_ceiling = 0: the large square product
# timed for 1 s with both ranks multiplying; docs/configuration.md) by a
# one-step run of each build, and kept in $OUT/gemm-ceilings.txt (not the
# user's ~/.cache file, which may hold a figure measured under load), so that
# every MFU of the table and every vitkd run's result.json divide by the same
# figure, measured with nothing else running (a short probe of its own varied
# by +-8 % between calls: experiments/performance-log.md, 2026-12-07). Each
# program is divided by its own LibTorch's ceiling (2.x's bf16 products ran
# 1.7x 1.13's on a Xeon with AMX, 2026-12-07); timm's is the ceiling of the
# build whose LibTorch is torch's (none: no MFU for timm).
declare -A CEIL LIBTORCH
export VITKD_CEILING_FILE=$OUT/gemm-ceilings.txt
rm -f "$VITKD_CEILING_FILE"
for b in "${VITKD[@]}"; do
  c=$OUT/ceiling-${b//\//_}
  mapfile -t S < <(sets "${COMMON[@]}" run.mode=\"teacher\" model.preset=\"vit_s16\" train.max_steps=1 data.batch_size=2 \
                        checkpoint.every_steps=0 train.mfu_ceiling=0 run.out_dir=\"$c\")
  rm -rf "$c"
  mpirun -n "$NP" "$b/vitkd" train "$BASE" "${S[@]}" > "$c.log" 2>&1 ||
    { echo "vs_timm: the ceiling run of $b failed ($c.log)" >&2; exit 1; }
  read -r CEIL[$b] LIBTORCH[$b] < <(/usr/bin/python3 -c 'import json, sys; r = json.load(open(sys.argv[1]))
print(r["gemm_flops_per_core"], r["libtorch"])' "$c/result.json")
  drop_checkpoints "$c"
done
TORCH=$("$PT2_PYTHON" -c 'import torch; print(torch.__version__.split("+")[0])')
TIMM_CEIL=0
for b in "${VITKD[@]}"; do
  if [ "${LIBTORCH[$b]}" = "$TORCH" ]; then TIMM_CEIL=${CEIL[$b]}; fi
done
echo "vs_timm: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | xargs), $(nproc --all) cores;" \
     "precision $PRECISION; ceilings in GFLOP/s per core:" \
     "$(for b in "${VITKD[@]}"; do printf '%s (LibTorch %s) %.0f; ' "$b" "${LIBTORCH[$b]}" "$(awk -v c="${CEIL[$b]}" 'BEGIN {print c / 1e9}')"; done)" \
     "timm (torch $TORCH) $(awk -v c="$TIMM_CEIL" 'BEGIN {print (c > 0 ? sprintf("%.0f", c / 1e9) : "none")}');" \
     "$ROUNDS rounds of $STEPS steps (median after $WARMUP), batch $BATCH x $NP ranks${VITKD_SET:+; vitkd with $VITKD_SET}"

run_vitkd() {  # BUILD MODE DIR
  local mode=$2 dir=$3 extra=()
  [ "$mode" = distill ] && extra=(run.mode=\"distill\" teacher.checkpoint=\"$TEACHER\") || extra=(run.mode=\"teacher\")
  mapfile -t S < <(sets "${COMMON[@]}" "${extra[@]}" model.preset=\"vit_s16\" train.max_steps="$STEPS" \
                        checkpoint.every_steps=0 train.mfu_ceiling="${CEIL[$1]}" run.out_dir=\"$dir\" "${VSET[@]}")
  rm -rf "$dir"
  mpirun -n "$NP" "$1/vitkd" train "$BASE" "${S[@]}" > "$dir.log" 2>&1 ||
    { echo "vs_timm: vitkd run failed ($dir.log)" >&2; exit 1; }
  drop_checkpoints "$dir"
}
run_timm() {  # PEER MODE DIR
  local peer=$1 mode=$2 dir=$3 extra=(--mode teacher)
  [ "$mode" = distill ] && extra=(--mode distill --timm-teacher vit_base_patch16_224 --kind soft)
  [ "$peer" = compiled ] && extra+=(--compile)
  mkdir -p "$dir"
  "$PT2_PYTHON" benchmarks/pytorch_baseline.py --nproc "$NP" --data "$DATA" --timm-student vit_small_patch16_224 \
    --image-size 224 --channels 3 --classes 10 --batch-size "$BATCH" --max-steps "$STEPS" --epochs 1 \
    --warmup-steps 0 --warmup-timing-steps "$WARMUP" --threads 1 --log-every 1 "${PT_PREC[@]}" "${extra[@]}" \
    --out "$dir/result.json" > "$dir.log" 2>&1 || { echo "vs_timm: timm run failed ($dir.log)" >&2; exit 1; }
}
t0=$(date +%s)
for ((r = 0; r < ROUNDS; r++)); do
  for mode in "${MODE_LIST[@]}"; do
    for b in "${VITKD[@]}"; do
      run_vitkd "$b" "$mode" "$OUT/$mode-vitkd-$b-$r"
      echo "  round $((r + 1)) $mode vitkd ($b) done, $(( $(date +%s) - t0 )) s"
    done
    for p in "${PEER_LIST[@]}"; do
      run_timm "$p" "$mode" "$OUT/$mode-timm-$p-$r"
      echo "  round $((r + 1)) $mode timm-$p done, $(( $(date +%s) - t0 )) s"
    done
  done
done
/usr/bin/python3 jobs/bench/vs_timm_summary.py "$OUT" --rounds "$ROUNDS" --warmup "$WARMUP" --batch $((BATCH * NP)) \
  --ceilings "$(for b in "${VITKD[@]}"; do printf '%s=%s ' "$b" "${CEIL[$b]}"; done)" --timm-ceiling "$TIMM_CEIL" --cores "$NP" --precision "$PRECISION" --builds "${VITKD[*]}" --peers "${PEER_LIST[*]}" \
  --modes "${MODE_LIST[*]}" --python "$PT2_PYTHON" --seconds $(( $(date +%s) - t0 ))
