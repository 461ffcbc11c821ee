#!/usr/bin/env bash
# From a folder of photos to a timm student, every step a photo user takes:
#   1. the photos: PHOTOS (one subfolder per class), or generated ones (4 classes
#      of JPEG and PNG files of several sizes) when it is not set
#   2. vitkd prepare folder --size 256 (validation and test splits)
#   3. a teacher fine-tuned in timm (vit_small_patch16_224, TEACHER_STEPS steps,
#      random weights: no network) and imported (analysis/vitkd_import.py)
#   4. the teacher-view cache of the student's run (vitkd teacher-cache)
#   5. the student distilled with inputs/photos-distill.toml at 224x224 (DeiT-Ti's
#      shape with its distillation token, STEPS steps), evaluated on the centre crop
#   6. exported (vitkd export, vitkd_export.py --timm-dir) and loaded by timm alone:
#      timm.create_model("local-dir:...", pretrained=True), strict; its logits against
#      vitkd's, and its test top-1 with timm's own transform against vitkd's
#   7. a table of every file written
# Environment: VITKD (default build/vitkd), PYTHON (a Python with torch, timm,
# safetensors, h5py and PIL; default the venv of jobs/setup-torch2.sh), OUT (default
# runs/photos-demo, emptied), NP (ranks, 2), PHOTOS, TEACHER_STEPS (10, batch 8), STEPS (6).
# The torch2 lane runs it (test torch2.photos_demo). About 2 minutes on 2 cores.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
VITKD=$(realpath "${VITKD:-$ROOT/build/vitkd}")
[ -x "$VITKD" ] || { echo "photos_demo: no vitkd at $VITKD; build it (bash jobs/build.sh) or set VITKD" >&2; exit 2; }
PY=${PYTHON:-$(bash "$ROOT/jobs/setup-torch2.sh" | tail -n 1)/bin/python}
"$PY" -c 'import timm, safetensors, h5py, PIL' 2> /dev/null ||
  { echo "photos_demo: $PY lacks timm, safetensors, h5py or PIL; run jobs/setup-torch2.sh or set PYTHON" >&2; exit 2; }
OUT=$(realpath -m "${OUT:-runs/photos-demo}")
NP=${NP:-2}
TEACHER_STEPS=${TEACHER_STEPS:-10}
STEPS=${STEPS:-6}
source "$ROOT/jobs/env.sh"
rm -rf "$OUT" && mkdir -p "$OUT"
T0=$(date +%s)
step() { echo; echo "== photos_demo: $* ($(( $(date +%s) - T0 )) s)"; }
vk() { mpirun -n "$NP" "$VITKD" "$@"; }

step "1. the photos"
PHOTOS=${PHOTOS:-}
if [ -z "$PHOTOS" ]; then
  PHOTOS=$OUT/photos
  "$PY" "$ROOT/jobs/lib/make_photos.py" "$PHOTOS" --per-class 40 --seed 7
fi

step "2. prepare at 256"
vk prepare folder "$PHOTOS" --out "$OUT/photos.h5" --size 256 --val-fraction 0.1 --test-fraction 0.2
K=$("$PY" -c 'import h5py, sys; print(len(h5py.File(sys.argv[1], "r").attrs["class_names"]))' "$OUT/photos.h5")

step "3. a timm teacher, fine-tuned $TEACHER_STEPS steps, imported"
"$PY" - "$OUT" "$K" "$TEACHER_STEPS" <<'PY'
import sys
import h5py, numpy as np, timm, torch
from safetensors.torch import save_file
out, k, steps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
torch.manual_seed(0)
with h5py.File(f"{out}/photos.h5", "r") as f:
    x, y = f["train/images"][()], f["train/labels"][()]
    mean, std = (torch.tensor(f.attrs[a], dtype=torch.float32).view(1, 3, 1, 1) for a in ("mean", "std"))
# The teacher sees vitkd's normalisation (the dataset's mean and std), so no --timm-mean at import.
m = timm.create_model("vit_small_patch16_224", pretrained=False, num_classes=k)
opt = torch.optim.AdamW(m.parameters(), lr=3e-4, weight_decay=0.05)
rng = np.random.default_rng(0)
m.train()
for s in range(steps):
    idx = rng.choice(len(x), 8, replace=False)
    t, l = rng.integers(0, 33, size=2)  # a random 224 crop of the 256 store, and a flip
    b = torch.from_numpy(x[idx, t:t + 224, l:l + 224, :]).permute(0, 3, 1, 2).float() / 255
    b = ((b.flip(3) if s % 2 else b) - mean) / std
    loss = torch.nn.functional.cross_entropy(m(b), torch.from_numpy(y[idx]).long())
    opt.zero_grad()
    loss.backward()
    opt.step()
    if s % 5 == 4 or s == steps - 1:
        print(f"photos_demo: teacher step {s + 1}/{steps}, loss {loss.item():.3f}")
save_file(m.state_dict(), f"{out}/teacher.safetensors")
PY
"$PY" "$ROOT/analysis/vitkd_import.py" "$OUT/teacher.safetensors" --preset vit_s16 --out "$OUT/teacher.h5"

step "4. the teacher-view cache, 5. the student distilled at 224"
S=(--set "data.path=\"$OUT/photos.h5\"" --set "teacher.checkpoint=\"$OUT/teacher.h5\"" --set model.preset=vit_ti16
   --set "model.classes=$K" --set data.batch_size=8 --set "train.max_steps=$STEPS" --set optim.warmup_steps=2
   --set "run.out_dir=\"$OUT/student\"" --set "distill.teacher_cache_file=\"$OUT/views.h5\"")
vk teacher-cache "$ROOT/inputs/photos-distill.toml" "${S[@]}"
vk train "$ROOT/inputs/photos-distill.toml" "${S[@]}" --set distill.teacher_cache=true

step "6. exported, loaded by timm alone"
"$VITKD" export "$OUT/student/checkpoint.h5" --out "$OUT/export"
"$PY" "$OUT/export/vitkd_export.py" "$OUT/export" --timm-dir "$OUT/export/timm"
"$PY" - "$OUT" <<'PY'
import json, sys
import h5py, numpy as np, timm, timm.data, torch
from PIL import Image
out = sys.argv[1]
m = timm.create_model(f"local-dir:{out}/export/timm", pretrained=True).eval()  # strict load
cfg = timm.data.resolve_data_config(model=m)
tf = timm.data.create_transform(**cfg)
with h5py.File(f"{out}/export/reference.h5", "r") as h:
    x, want = torch.from_numpy(h["input"][()]), torch.from_numpy(h["logits"][()])
with torch.no_grad():
    rel = ((m(x) - want).abs().max() / want.abs().max().clamp(min=1)).item()
assert rel <= 1e-4, f"timm's logits differ from vitkd's by {rel:.2e} of the largest"
with h5py.File(f"{out}/photos.h5", "r") as f:
    imgs, labels = f["test/images"][()], f["test/labels"][()]
with torch.no_grad():
    batch = torch.stack([tf(Image.fromarray(a)) for a in imgs])
    top1 = float((m(batch).argmax(1).numpy() == labels).mean())
r = json.load(open(f"{out}/student/result.json"))
print(f"photos_demo: timm {timm.__version__} {m.pretrained_cfg['architecture']} from local-dir: logits vs vitkd "
      f"{rel:.1e}; transform {cfg['interpolation']}, crop_pct {cfg['crop_pct']}; test top-1 with timm's transform "
      f"{top1:.4f}, vitkd's {r['test_top1']:.4f} ({len(labels)} images)")
# vitkd may evaluate in bf16 where the CPU has it: one image of the test split may flip.
assert abs(top1 - r["test_top1"]) <= 1.0 / len(labels) + 1e-9, (top1, r["test_top1"])
PY

step "7. what it wrote"
"$PY" - "$OUT" <<'PY'
import os, sys
out = sys.argv[1]
what = {"photos.h5": "the photos at 256 (vitkd prepare folder)", "teacher.safetensors": "the timm teacher, fine-tuned",
        "teacher.h5": "the teacher as a vitkd checkpoint (vitkd_import.py)", "views.h5": "the teacher-view cache",
        "student/checkpoint.h5": "the distilled student", "student/result.json": "its figures",
        "student/timing.h5": "its per-rank timing log", "export/model.json": "the export's description",
        "export/timm/model.safetensors": "the student for timm", "export/timm/config.json": "its timm config (transform, classes)"}
print(f"{'file':<34}{'MB':>9}  what")
for f, w in what.items():
    p = os.path.join(out, f)
    print(f"{f:<34}{os.path.getsize(p) / 1e6:>9.2f}  {w}")
PY
echo "photos_demo: OK in $(( $(date +%s) - T0 )) s; everything is in $OUT"
