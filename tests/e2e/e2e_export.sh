#!/usr/bin/env bash
# Student export, at 2 ranks. "setup" trains a small ViT (3 channels, DeiT
# distillation token) and exports it (`vitkd export`: weights + model.json +
# reference logits + the Python loader). Then:
#   served_torchscript_matches_vitkd   the copied loader rebuilds the model in PyTorch, checks its
#                                      logits against vitkd's (fp32: 1e-4, bf16: 2^-5, both
#                                      relative to max(1, max|logit|)) and saves TorchScript; the
#                                      TorchScript file alone (no vitkd code) gives the same logits
#   non_checkpoint_is_refused          exporting a dataset file: exit 2, one line
#   e2e_export.sh --list | CASE NP ROOT    (tests/lib/common.sh)
source "$(dirname "$0")/../lib/common.sh"
CASES=(setup served_torchscript_matches_vitkd:setup non_checkpoint_is_refused:setup)

SETUP=${3-}/setup
export MPI_TIMEOUT=300

case_setup() {
  synthetic syn.h5 256 64 16 5 --channels 3 --seed 4
  LOG=train.log expect 0 vk "$NP" train "$SRC/inputs/smoke.toml" --set data.path="$WORK/syn.h5" \
    --set run.out_dir=run --set model.channels=3 --set model.classes=5 --set model.dist_token=true \
    --set train.epochs=3 --set train.mfu_ceiling=1e11
  LOG=export.log expect 0 "$VITKD" export "$WORK/run/checkpoint.h5" --out "$WORK/export" --batch 6
}

case_served_torchscript_matches_vitkd() {
  local f
  for f in weights.h5 model.json reference.h5 vitkd_model.py vitkd_export.py; do
    [ -s "$SETUP/export/$f" ] || fail "export lacks $f"
  done
  cmp "$SETUP/export/vitkd_model.py" "$SRC/analysis/vitkd_model.py"
  cmp "$SETUP/export/vitkd_export.py" "$SRC/analysis/vitkd_export.py"
  # The loader as a user runs it: from another directory, nothing else on the path.
  (cd /tmp && "$PYTHON" "$SETUP/export/vitkd_export.py" "$SETUP/export" --torchscript "$WORK/student.pt") \
    > loader.log
  grep -q "vitkd_export: OK" loader.log || { cat loader.log; fail "the loader did not pass its own check"; }
  "$PYTHON" - "$SETUP" <<'PY'
import json, sys, h5py, torch
setup = sys.argv[1]
meta = json.load(open(f"{setup}/export/model.json"))
assert meta["format"] == "vitkd-export" and meta["format_version"] == 1
assert (meta["channels"], meta["classes"], meta["dist_token"]) == (3, 5, True), meta
assert meta["class_names"] == [f"class{k}" for k in range(5)] and len(meta["mean"]) == 3
with h5py.File(f"{setup}/run/checkpoint.h5", "r") as c, h5py.File(f"{setup}/export/weights.h5", "r") as w:
    assert sorted(c["model"].keys()) == sorted(w["model"].keys())
    for k in c["model"]:
        assert (c["model"][k][()] == w["model"][k][()]).all(), k
with h5py.File(f"{setup}/export/reference.h5", "r") as f:
    x = torch.from_numpy(f["input"][()])
    l32, l16 = torch.from_numpy(f["logits"][()]), torch.from_numpy(f["logits_bf16"][()])
assert x.shape == (6, 3, 16, 16) and l32.shape == (6, 5), (x.shape, l32.shape)
served = torch.jit.load("student.pt")  # serving: TorchScript only
with torch.no_grad():
    got = served(x)
    got_b = served(x[:1])                          # another batch size
scale = max(1.0, l32.abs().max().item())
d32, d16 = ((got - l32).abs().max().item() / scale, (got - l16).abs().max().item() / scale)
print(f"served TorchScript vs vitkd: fp32 {d32:.3e}, bf16 {d16:.3e} (relative to {scale:.3f}); "
      f"bf16 vs fp32 inside vitkd {(l16 - l32).abs().max().item() / scale:.3e}")
assert d32 <= 1e-4 and d16 <= 2 ** -5, (d32, d16)
assert (got_b - got[:1]).abs().max().item() <= 1e-5
assert (got.argmax(1) == l32.argmax(1)).all()
PY
}

case_non_checkpoint_is_refused() {
  expect_error 2 "not a vitkd checkpoint" "$VITKD" export "$SETUP/syn.h5" --out bad
}

PYTHON_MODULES=(h5py numpy torch)
e2e_main "$@"
