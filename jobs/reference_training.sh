#!/usr/bin/env bash
# The long version of tests/e2e_reference_training.sh: vitkd against the
# PyTorch reference for 200 steps on Fashion-MNIST with the teacher's shape
# (dim 192, depth 6, 3 heads, patch 4, batch 64, lr 1e-3, warm-up 100 steps,
# 3-epoch cosine stopped at step 200), 1 rank, fp32, clipping at 1.0 on both
# sides. Writes runs/reference-training/<variant>/reference.json (per-step
# losses of both sides and the summary). About 5-10 minutes on 2 cores.
#   bash jobs/reference_training.sh [build/vitkd]
set -euo pipefail
cd "$(dirname "$0")/.."
source jobs/env.sh
VITKD=$(realpath "${1:-build/vitkd}")
[ -f data/fmnist.h5 ] || "$VITKD" prepare fashion-mnist --out data/fmnist.h5
export VITKD SRC=$PWD PYTHON=${PYTHON:-/usr/bin/python3}
export DATA=$PWD/data/fmnist.h5 STEPS=${STEPS:-200} EPOCHS=3 BATCH=64 LR=1e-3 WARMUP=100
export DIM=192 DEPTH=6 HEADS=3 PATCH=4 PARAM_RTOL=${PARAM_RTOL:-1e-2}
export VARIANTS=${VARIANTS:-default}
bash tests/e2e_reference_training.sh "$PWD/runs/reference-training"
