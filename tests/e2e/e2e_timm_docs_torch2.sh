#!/usr/bin/env bash
# docs/timm.md's commands run as written (test torch2.timm_docs_commands_run_as_written):
# every ```bash block of the page, in order, in a folder that holds what the
# page assumes the user has:
#   food-photos/            one folder per class, 101 classes (jobs/lib/make_photos.py)
#   food-vitb.safetensors   timm's vit_base_patch16_224 (num_classes=101, random
#                           weights), standing in for the fine-tuned model
# and build/, inputs/, jobs/, analysis/ of this tree. The one change: the
# training command gets `--set train.max_steps=1 --set data.batch_size=2
# --set train.final_eval=false` appended (one step of ViT-B/16 -> ViT-S/16 at
# 224 instead of 300 epochs). Then the page's Python block that loads the
# student into timm runs, and the results are checked: one step trained, the
# teacher's and the student's parameter counts timm's (vit_base_patch16_224 and
# deit_small_distilled_patch16_224 at 101 classes), and timm's
# resolve_data_config of the export the dataset's mean, std and crop_pct.
#   e2e_timm_docs_torch2.sh WORKDIR   (env: VITKD, SRC, VITKD_TORCH2_PYTHON)
# Exit 77 (skipped) unless VITKD_TORCH2_PYTHON names an interpreter with timm.
source "$(dirname "$0")/../lib/common.sh"
if [ -z "${VITKD_TORCH2_PYTHON:-}" ] || ! "$VITKD_TORCH2_PYTHON" -c 'import timm, safetensors' 2> /dev/null; then
  echo "skip: VITKD_TORCH2_PYTHON is not set to a Python with timm and safetensors (jobs/setup-torch2.sh makes one)"
  exit 77
fi
PY=$VITKD_TORCH2_PYTHON
export PYTHONWARNINGS=ignore
# The page's `bash jobs/setup-torch2.sh` finds the venv this Python belongs to.
export VITKD_TORCH2_VENV=$(dirname "$(dirname "$PY")")
[ -x "$VITKD_TORCH2_VENV/bin/python" ] || fail "$PY is not in a venv's bin/ (jobs/setup-torch2.sh makes one)"
work=$1
rm -rf "$work" && mkdir -p "$work/build" && cd "$work"
ln -s "$VITKD" build/vitkd
for d in inputs jobs analysis; do ln -s "$SRC/$d" "$d"; done
mkdir -p data runs export

"$PY" "$SRC/jobs/lib/make_photos.py" food-photos --classes 101 --per-class 12 --seed 5 > /dev/null
"$PY" - <<'PY'
import timm, torch
from safetensors.torch import save_file
torch.manual_seed(0)
m = timm.create_model("vit_base_patch16_224", pretrained=False, num_classes=101)
save_file(m.state_dict(), "food-vitb.safetensors")
PY

# The page's bash blocks, continuation lines joined, one command per line.
"$PY" - "$SRC/docs/timm.md" > commands.sh <<'PY'
import re, sys
text = open(sys.argv[1]).read()
blocks = re.findall(r"```bash\n(.*?)```", text, re.S)
assert len(blocks) >= 3, f"docs/timm.md has {len(blocks)} bash blocks, expected the import, training and export"
for b in blocks:
    for cmd in b.replace("\\\n", " ").splitlines():
        if not cmd.strip():
            continue
        if " train " in cmd and "build/vitkd" in cmd:
            cmd += " --set train.max_steps=1 --set data.batch_size=2 --set train.final_eval=false"
        print(cmd)
PY
grep -q 'vitkd train' commands.sh || fail "no training command in docs/timm.md's bash blocks"
echo "docs/timm.md's commands:" && cat commands.sh
bash -euo pipefail commands.sh > commands.log 2>&1 || { tail -30 commands.log; fail "a command of docs/timm.md failed (above)"; }

# The page's Python block that loads the export into timm, then the checks.
"$PY" - "$SRC/docs/timm.md" <<'PY'
import json, re, sys
import h5py, numpy as np, timm
text = open(sys.argv[1]).read()
blocks = [b for b in re.findall(r"```python\n(.*?)```", text, re.S) if "local-dir:" in b]
assert len(blocks) == 1, "docs/timm.md: expected one python block that loads the export"
env = {}
exec(blocks[0], env)  # model, cfg
r = json.load(open("runs/food-student/result.json"))
assert r["steps"] == 1, f"trained {r['steps']} steps, expected 1"
teacher = timm.create_model("vit_base_patch16_224", pretrained=False, num_classes=101)
student = timm.create_model("deit_small_distilled_patch16_224", pretrained=False, num_classes=101)
count = lambda m: sum(p.numel() for p in m.parameters())
assert r["teacher_parameters"] == count(teacher), (r["teacher_parameters"], count(teacher))
assert r["parameters"] == count(student) == count(env["model"]), (r["parameters"], count(student))
with h5py.File("data/food.h5", "r") as f:
    mean, std = np.array(f.attrs["mean"]), np.array(f.attrs["std"])
    assert f["train/images"].shape[1:] == (256, 256, 3), f["train/images"].shape
cfg = env["cfg"]
assert np.allclose(cfg["mean"], mean) and np.allclose(cfg["std"], std), (cfg, mean, std)
assert abs(cfg["crop_pct"] - 0.875) < 1e-9 and cfg["interpolation"] == "bilinear", cfg
print(f"timm docs: {len(text.split('```bash')) - 1} bash blocks ran; 1 step of ViT-B/16 -> ViT-S/16 at 224; "
      f"teacher {count(teacher):,} and student {count(student):,} parameters as timm's; "
      f"resolve_data_config: mean {np.round(cfg['mean'], 4).tolist()}, crop_pct {cfg['crop_pct']}")
PY
