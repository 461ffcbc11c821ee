#!/usr/bin/env bash
# C++ ViT vs PyTorch ViT on the same weights (see vit_reference.py).
set -euo pipefail
out=$1
rm -rf "$out" && mkdir -p "$out"
"$VIT_DUMP" "$out"
"$PYTHON" "$SRC/tests/vit_reference.py" "$out"
