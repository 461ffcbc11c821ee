#!/usr/bin/env bash
# Student export round trip: vitkd trains a small ViT (3 channels, DeiT
# distillation token), `vitkd export` writes weights + model.json + reference
# logits + the Python loader; the copied loader rebuilds the model in PyTorch,
# checks its logits against vitkd's (fp32: 1e-4, bf16: 2^-5, both relative to
# max(1, max|logit|)) and saves TorchScript; the TorchScript file alone (no
# vitkd code) then gives the same logits.
#   export_roundtrip.sh WORKDIR     (env: VITKD, MPIEXEC, MPIEXEC_NUMPROC_FLAG, SRC, PYTHON)
set -euo pipefail
work=$1
rm -rf "$work" && mkdir -p "$work"
run() { timeout 300 $MPIEXEC $MPIEXEC_NUMPROC_FLAG 2 $MPIEXEC_PREFLAGS "$VITKD" "$@"; }

"$VITKD" prepare synthetic --out "$work/syn.h5" --train 256 --test 64 --size 16 --channels 3 \
  --classes 5 --seed 4
run train "$SRC/inputs/smoke.toml" --set data.path="$work/syn.h5" --set run.out_dir="$work/run" \
  --set model.channels=3 --set model.classes=5 --set model.dist_token=true --set train.epochs=3 \
  --set train.mfu_ceiling=1e11 > "$work/train.log"
"$VITKD" export "$work/run/checkpoint.h5" --out "$work/export" --batch 6 | tee "$work/export.log"
for f in weights.h5 model.json reference.h5 vitkd_model.py vitkd_export.py; do
  [ -s "$work/export/$f" ] || { echo "FAIL: export lacks $f"; exit 1; }
done
cmp "$work/export/vitkd_model.py" "$SRC/analysis/vitkd_model.py"
cmp "$work/export/vitkd_export.py" "$SRC/analysis/vitkd_export.py"

# The loader as a user runs it: from the export directory, nothing else on the path.
(cd /tmp && "$PYTHON" "$work/export/vitkd_export.py" "$work/export" --torchscript "$work/student.pt") \
  | tee "$work/loader.log"
grep -q "vitkd_export: OK" "$work/loader.log"

"$PYTHON" - "$work" <<'PY'
import json, sys, h5py, torch
work = sys.argv[1]
meta = json.load(open(f"{work}/export/model.json"))
assert meta["format"] == "vitkd-export" and meta["format_version"] == 1
assert (meta["channels"], meta["classes"], meta["dist_token"]) == (3, 5, True), meta
assert meta["class_names"] == [f"class{k}" for k in range(5)] and len(meta["mean"]) == 3
with h5py.File(f"{work}/run/checkpoint.h5", "r") as c, h5py.File(f"{work}/export/weights.h5", "r") as w:
    assert sorted(c["model"].keys()) == sorted(w["model"].keys())
    for k in c["model"]:
        assert (c["model"][k][()] == w["model"][k][()]).all(), k
with h5py.File(f"{work}/export/reference.h5", "r") as f:
    x = torch.from_numpy(f["input"][()])
    l32, l16 = torch.from_numpy(f["logits"][()]), torch.from_numpy(f["logits_bf16"][()])
assert x.shape == (6, 3, 16, 16) and l32.shape == (6, 5), (x.shape, l32.shape)
served = torch.jit.load(f"{work}/student.pt")  # serving: TorchScript only
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
print("OK: export round trip")
PY

# Not a checkpoint: one line, exit 2.
set +e
"$VITKD" export "$work/syn.h5" --out "$work/bad" > "$work/bad.out" 2>&1
rc=$?
set -e
if [ "$rc" -ne 2 ] || ! grep -q "not a vitkd checkpoint" "$work/bad.out"; then
  echo "FAIL: export of a dataset file: exit $rc"; cat "$work/bad.out"; exit 1
fi
