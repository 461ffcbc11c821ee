#!/usr/bin/env bash
# timm in and out (docs/timm.md), against timm's own models (PyPI timm 1.0 in
# the venv of jobs/setup-torch2.sh).
#   teacher_import_equals_timm   timm ViTs (random weights, scaled so that the
#       logits are of order 1) -> analysis/vitkd_import.py -> vitkd export's
#       reference logits (vitkd's C++ forward, fp32) equal timm's on the same
#       input within 1e-5 of the largest |logit|: vit_tiny_patch16_224 (12
#       blocks, .safetensors), deit_tiny_distilled_patch16_224 (distillation
#       token, a DeiT-style {'model': state} .pth) and a ViT without QKV bias
#       whose timm normalisation is folded in (vitkd's dataset-normalised input
#       vs timm's input normalised its own way). The first then teaches a
#       distillation in fp32: the teacher's test top-1 vitkd reports equals
#       timm's on the same test images, and its parameter count timm's.
#   student_export_loads_into_timm   a student trained by vitkd, exported with
#       `vitkd export` + the copied vitkd_export.py --timm --torch-export: the
#       safetensors file loads into timm.create_model(name, **kwargs from its
#       metadata) with strict=True and gives vitkd's reference logits (1e-5 of
#       the largest |logit|), as does the torch.export program; twice: a plain
#       ViT, and one with the distillation token, LayerNorm eps 1e-5 and an MLP
#       width that rounds (mlp_ratio 2.3).
#   import_bad_input_one_line   a ResNet ("not a ViT"), files whose tensors do not fit the preset and
#       keys, and files that are not state dicts: exit 2, one line naming the
#       first mismatching tensor and both shapes (or what the file is), nothing written.
#   e2e_timm_torch2.sh CASE WORKDIR   (env: VITKD, SRC, VITKD_TORCH2_PYTHON, MPIEXEC...)
# Exit 77 (skipped) unless VITKD_TORCH2_PYTHON names an interpreter with timm.
source "$(dirname "$0")/../lib/common.sh"
if [ -z "${VITKD_TORCH2_PYTHON:-}" ] || ! "$VITKD_TORCH2_PYTHON" -c 'import timm, safetensors' 2> /dev/null; then
  echo "skip: VITKD_TORCH2_PYTHON is not set to a Python with timm and safetensors (jobs/setup-torch2.sh makes one)"
  exit 77
fi
PY=$VITKD_TORCH2_PYTHON
export PYTHONWARNINGS=ignore
case=$1 work=$2
rm -rf "$work" && mkdir -p "$work" && cd "$work"
IMPORT=("$PY" "$SRC/analysis/vitkd_import.py")

# make_timm NAME FILE [KEY=VALUE ...]: timm.create_model(NAME, pretrained=False,
# KEY=VALUE ...) with seeded random weights of order 1 (timm's own init gives
# logits near 0, which would make a relative check weak), saved to FILE
# (.safetensors, a .pth state dict, or a .pth {'model': state} with WRAP=1).
make_timm() {
  "$PY" - "$@" <<'PY'
import ast, os, sys, torch, timm
from safetensors.torch import save_file
name, out, kv = sys.argv[1], sys.argv[2], sys.argv[3:]
kw = {k: ast.literal_eval(v) for k, v in (a.split("=", 1) for a in kv)}
torch.manual_seed(7)
m = timm.create_model(name, pretrained=False, **kw)
with torch.no_grad():
    for n, p in m.named_parameters():
        if p.dim() >= 2 and n != "pos_embed" and not n.endswith("_token"):
            p.normal_(0, p[0].numel() ** -0.5)          # weights: 1/sqrt(fan_in)
        elif "norm" in n and n.endswith("weight"):
            p.normal_(1, 0.2)
        else:
            p.normal_(0, 0.2 if n.endswith("bias") else 0.5)
sd = {k: v.contiguous() for k, v in m.state_dict().items()}
if out.endswith(".safetensors"):
    save_file(sd, out)
else:
    torch.save({"model": sd, "epoch": 3} if os.environ.get("WRAP") else sd, out)
PY
}

# same_logits TIMM_FILE NAME REF_DIR [--fold DATA.h5 MEAN STD] [KEY=VALUE ...]:
# timm's model with the file's weights on vitkd's reference input (renormalised
# to timm's statistics with --fold) against vitkd's fp32 reference logits.
same_logits() {
  "$PY" - "$@" <<'PY'
import ast, sys, h5py, torch, timm
from safetensors.torch import load_file
f, name, ref, rest = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
fold = None
if rest and rest[0] == "--fold":
    fold, rest = rest[1:4], rest[4:]
kw = {k: ast.literal_eval(v) for k, v in (a.split("=", 1) for a in rest)}
m = timm.create_model(name, pretrained=False, **kw).eval()
sd = load_file(f) if f.endswith(".safetensors") else torch.load(f, weights_only=True)
m.load_state_dict(sd.get("model", sd), strict=True)
with h5py.File(f"{ref}/reference.h5", "r") as h:
    x, want = torch.from_numpy(h["input"][()]), torch.from_numpy(h["logits"][()])
if fold:  # vitkd's x = (p - m)/s with the dataset's m, s; timm's = (p - tm)/ts
    with h5py.File(fold[0], "r") as d:
        mean, std = (torch.tensor(d.attrs[k], dtype=torch.float64).reshape(1, -1, 1, 1) for k in ("mean", "std"))
    tm, ts = (torch.tensor(ast.literal_eval(v), dtype=torch.float64).reshape(1, -1, 1, 1) for v in fold[1:])
    x = ((x.double() * std + mean - tm) / ts).float()
with torch.no_grad():
    got = m(x)
rel = ((got - want).abs().max() / want.abs().max()).item()
print(f"{name} {f}: vitkd vs timm logits, max |diff| / max |logit| = {rel:.3e} "
      f"(max |logit| {want.abs().max().item():.3f}, {x.shape[0]} images {tuple(x.shape[1:])})")
sys.exit(0 if rel <= 1e-5 else 1)
PY
}

case_teacher_import_equals_timm() {
  synthetic syn.h5 64 64 32 10 --channels 3 --seed 3
  # vit_tiny_patch16_224 at 32x32, 12 blocks, from .safetensors
  make_timm vit_tiny_patch16_224 ti.safetensors num_classes=10 img_size=32
  LOG=import1.log expect 0 "${IMPORT[@]}" ti.safetensors --preset vit_ti16 --set model.image_size=32 --out ti.h5
  LOG=export1.log expect 0 "$VITKD" export ti.h5 --out ti --batch 8 --data syn.h5
  same_logits ti.safetensors vit_tiny_patch16_224 ti num_classes=10 img_size=32
  # DeiT's distilled ViT, 2 blocks, as DeiT's training script saves it ({'model': ...})
  WRAP=1 make_timm deit_tiny_distilled_patch16_224 dd.pth num_classes=7 img_size=48 depth=2
  LOG=import2.log expect 0 "${IMPORT[@]}" dd.pth --preset vit_ti16 --set model.image_size=48 \
    --set model.depth=2 --out dd.h5
  grep -q "dist token" import2.log || { cat import2.log; fail "the distillation token was not imported"; }
  LOG=export2.log expect 0 "$VITKD" export dd.h5 --out dd --batch 8
  same_logits dd.pth deit_tiny_distilled_patch16_224 dd num_classes=7 img_size=48 depth=2
  # No QKV bias (a zero bias in vitkd) and timm's (0.5, 0.5, 0.5) normalisation folded in
  make_timm vit_tiny_patch16_224 nb.safetensors num_classes=10 img_size=32 depth=3 qkv_bias=False
  LOG=import3.log expect 0 "${IMPORT[@]}" nb.safetensors --preset vit_ti16 --set model.image_size=32 \
    --set model.depth=3 --data syn.h5 --timm-mean 0.5,0.5,0.5 --timm-std 0.5,0.5,0.5 --out nb.h5
  grep -q "zero bias" import3.log && grep -q "folded" import3.log || { cat import3.log; fail "notes missing"; }
  LOG=export3.log expect 0 "$VITKD" export nb.h5 --out nb --batch 8 --data syn.h5
  same_logits nb.safetensors vit_tiny_patch16_224 nb --fold syn.h5 "(0.5,0.5,0.5)" "(0.5,0.5,0.5)" \
    num_classes=10 img_size=32 depth=3 qkv_bias=False

  # The imported ViT-Ti as a distillation's teacher (fp32, so that its test
  # predictions are timm's to the last argmax).
  tiny_config d.toml model.image_size=32 model.channels=3 model.patch=8 model.dim=32 model.depth=2 \
    model.classes=10 'run.mode="distill"' 'teacher.checkpoint="ti.h5"' 'precision.compute="fp32"' \
    train.max_steps=4 distill.eval_agreement=true 'run.out_dir="distill"'
  LOG=distill.log expect 0 vk 2 train d.toml
  "$PY" - <<'PY'
import json, h5py, torch, timm
from safetensors.torch import load_file
r = json.load(open("distill/result.json"))
m = timm.create_model("vit_tiny_patch16_224", pretrained=False, num_classes=10, img_size=32).eval()
m.load_state_dict(load_file("ti.safetensors"), strict=True)
with h5py.File("syn.h5", "r") as f:
    x = torch.from_numpy(f["test/images"][()]).float() / 255  # [N, H, W, C]
    y = torch.from_numpy(f["test/labels"][()]).long()
    mean, std = (torch.tensor(f.attrs[k], dtype=torch.float32) for k in ("mean", "std"))
with torch.no_grad():
    top1 = (m(((x - mean) / std).permute(0, 3, 1, 2)).argmax(-1) == y).float().mean().item()
n = sum(p.numel() for p in m.parameters())
print(f"teacher's test top-1: vitkd {r['teacher_test_top1']:.4f}, timm {top1:.4f}; "
      f"parameters: vitkd {r['teacher_parameters']}, timm {n}")
assert abs(r["teacher_test_top1"] - top1) < 1e-9 and r["teacher_parameters"] == n
PY
}

case_student_export_loads_into_timm() {
  synthetic syn.h5 64 32 32 6 --channels 3 --seed 5
  local i shapes=("model.dim=32 model.depth=2 model.heads=2"
                  "model.dim=40 model.depth=2 model.heads=4 model.mlp_ratio=2.3 model.dist_token=true model.norm_eps=1e-5")
  for i in 0 1; do
    # shellcheck disable=SC2086  # the shape is a list of keys
    tiny_config s$i.toml model.image_size=32 model.channels=3 model.patch=8 model.classes=6 train.max_steps=12 \
      "run.out_dir=\"run$i\"" ${shapes[i]}
    LOG=train$i.log expect 0 vk 2 train s$i.toml
    LOG=export$i.log expect 0 "$VITKD" export run$i/checkpoint.h5 --out exp$i --batch 5
    local dir=()
    [ $i = 0 ] && dir=(--timm-dir "$work/exp$i/timm")  # (the second's norm_eps is not timm's: --timm only)
    (cd / && PYTHONWARNINGS=default "$PY" "$work/exp$i/vitkd_export.py" "$work/exp$i" --timm "$work/exp$i/student.safetensors" \
      "${dir[@]}" --torch-export "$work/exp$i/student.pt2") > loader$i.log 2>&1 || { cat loader$i.log; fail "vitkd_export.py --timm"; }
    if grep -qi "warning" loader$i.log; then cat loader$i.log; fail "vitkd_export.py printed a warning"; fi
    grep -q "vitkd_export: OK" loader$i.log || { cat loader$i.log; fail "the loader did not pass its own check"; }
    # As a user would: timm, the file and its metadata only.
    "$PY" - exp$i <<'PY'
import functools, json, sys, h5py, torch, timm
from safetensors import safe_open
from safetensors.torch import load_file
d = sys.argv[1]
with safe_open(f"{d}/student.safetensors", "pt") as f:
    meta = f.metadata()
kw = json.loads(meta["timm_kwargs"])
if float(meta["norm_eps"]) != 1e-6:
    kw["norm_layer"] = functools.partial(torch.nn.LayerNorm, eps=float(meta["norm_eps"]))
m = timm.create_model(meta["timm_model"], pretrained=False, **kw).eval()
m.load_state_dict(load_file(f"{d}/student.safetensors"), strict=True)
prog = torch.export.load(f"{d}/student.pt2").module()
with h5py.File(f"{d}/reference.h5", "r") as h:
    x, want = torch.from_numpy(h["input"][()]), torch.from_numpy(h["logits"][()])
with torch.no_grad():
    rel = ((m(x) - want).abs().max() / want.abs().max()).item()
    rel_p = ((prog(x) - want).abs().max() / want.abs().max()).item()
    rel_b1 = ((prog(x[:1]) - want[:1]).abs().max() / want.abs().max()).item()
vitkd_n = json.load(open(f"{d}/model.json"))["parameters"]
print(f"{d}: timm {meta['timm_model']} {kw} strict load; vs vitkd's logits: timm {rel:.3e}, torch.export "
      f"{rel_p:.3e} (batch 1: {rel_b1:.3e}), max |logit| {want.abs().max().item():.3f}; parameters "
      f"timm {sum(p.numel() for p in m.parameters())}, vitkd {vitkd_n}")
assert sum(p.numel() for p in m.parameters()) == vitkd_n
assert max(rel, rel_p, rel_b1) <= 1e-5, (rel, rel_p, rel_b1)
assert hasattr(m, "dist_token") == ("distilled" in meta["timm_model"])
# The transform timm resolves for the model is the one it was trained for
# (the metadata's pretrained_cfg; the folder's, loaded by timm alone).
cfg = json.loads(meta["pretrained_cfg"])
with h5py.File("syn.h5", "r") as h:
    mean, std = list(h.attrs["mean"]), list(h.attrs["std"])
close = lambda a, b: len(a) == len(b) and all(abs(u - v) < 1e-8 for u, v in zip(a, b))  # model.json: 10 digits
assert close(cfg["mean"], mean) and close(cfg["std"], std) and cfg["crop_pct"] == 0.875, cfg
assert cfg["interpolation"] == "bilinear" and cfg["input_size"] == [3, 32, 32], cfg
if d.endswith("0"):
    import timm.data
    t = timm.create_model(f"local-dir:{d}/timm", pretrained=True).eval()
    dc = timm.data.resolve_data_config(model=t)
    assert close(dc["mean"], mean) and close(dc["std"], std) and dc["crop_pct"] == 0.875, dc
    assert dc["interpolation"] == "bilinear", dc
    with torch.no_grad():
        rel_d = ((t(x) - want).abs().max() / want.abs().max()).item()
    assert rel_d <= 1e-5, rel_d
    print(f"{d}/timm: local-dir load vs vitkd's logits {rel_d:.3e}; resolve_data_config {dc}")
PY
  done
  grep -q "distilled" exp1/student.safetensors || fail "the second student is not timm's distilled ViT"
}

# refused MESSAGE... -- ARGS: the importer exits 2 with exactly one line on
# stderr holding every MESSAGE, nothing on stdout, and writes nothing.
refused() {
  local msgs=() m
  while [ "$1" != -- ]; do msgs+=("$1"); shift; done
  shift
  rm -f out.h5 out.h5.tmp
  local rc=0
  "${IMPORT[@]}" "$@" --out out.h5 > out.txt 2> err.txt || rc=$?
  [ "$rc" = 2 ] || { cat out.txt err.txt; fail "exit $rc, expected 2: $*"; }
  [ "$(wc -l < err.txt)" = 1 ] && [ ! -s out.txt ] || { cat out.txt err.txt; fail "not one line: $*"; }
  for m in "${msgs[@]}"; do grep -qF -- "$m" err.txt || { cat err.txt; fail "the line lacks '$m'"; }; done
  [ ! -e out.h5 ] && [ ! -e out.h5.tmp ] || fail "wrote a file: $*"
  echo "ok: $(cat err.txt)"
}

case_import_bad_input_one_line() {
  make_timm vit_small_patch16_224 s.safetensors num_classes=10 img_size=32 depth=2
  make_timm vit_tiny_patch16_224 t.pth num_classes=10 img_size=32 depth=2
  make_timm deit3_small_patch16_224 d3.safetensors num_classes=10 img_size=32 depth=2
  "$PY" -c 'import torch; torch.save([1, 2, 3], "list.pth"); torch.save({"w": torch.zeros(2), "epoch": 3}, "mixed.pth")'
  printf 'not a model\n%.0s' {1..20} > text.pth
  head -c 4000 s.safetensors > cut.safetensors
  refused "'cls_token'" "[1,1,384]" "[1,1,192]" "--preset vit_s16" -- s.safetensors --preset vit_ti16 \
    --set model.image_size=32 --set model.depth=2
  refused "'pos_embed'" "[1,5,192]" "[1,197,192]" "model.image_size=32" -- t.pth --preset vit_ti16 --set model.depth=2
  refused "'head.weight'" "[10,192]" "[5,192]" -- t.pth --preset vit_ti16 --set model.image_size=32 \
    --set model.depth=2 --set model.classes=5
  refused "'blocks.2.norm1.weight'" "[192]" "(12 missing)" -- t.pth --preset vit_ti16 --set model.image_size=32 \
    --set model.depth=3
  refused "'blocks.0.ls1.gamma'" "LayerScale" -- d3.safetensors --preset vit_s16 --set model.image_size=32 \
    --set model.depth=2
  refused "text.pth" "not a PyTorch state dict or safetensors file" -- text.pth --preset vit_ti16
  refused "cut.safetensors" "not a readable safetensors file" -- cut.safetensors --preset vit_ti16
  refused "list.pth" "holds a list, not a state dict" -- list.pth --preset vit_ti16
  refused "entry 'epoch' (int) is not a tensor" -- mixed.pth --preset vit_ti16
  refused "vit_x" "vit_ti16, vit_s16" -- t.pth --preset vit_x
  make_timm resnet18 r.safetensors num_classes=10
  refused "r.safetensors: not a ViT" "teacher.torchscript" -- r.safetensors --preset vit_ti16
}

case "$case" in
  teacher_import_equals_timm | student_export_loads_into_timm | import_bad_input_one_line) "case_$case" ;;
  *) fail "no case '$case'" ;;
esac
echo "OK: $case"
