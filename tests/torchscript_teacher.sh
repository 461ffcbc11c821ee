#!/usr/bin/env bash
# Teacher from TorchScript (teacher.torchscript): a vitkd teacher checkpoint is
# rebuilt in PyTorch (analysis/vitkd_model.py), scripted and saved with
# torch.jit.save; distilling a student from that file must give the same
# student as distilling from the checkpoint (same seed, fp32 compute), and a
# TorchScript teacher with the wrong class count must be refused (exit 2).
#   torchscript_teacher.sh WORKDIR     (env: VITKD, MPIEXEC, MPIEXEC_NUMPROC_FLAG, SRC, PYTHON)
set -euo pipefail
work=$1
rm -rf "$work" && mkdir -p "$work"
run() { timeout 300 $MPIEXEC $MPIEXEC_NUMPROC_FLAG 2 $MPIEXEC_PREFLAGS "$VITKD" "$@"; }

"$VITKD" prepare synthetic --out "$work/syn.h5" --train 256 --test 64 --size 16 --classes 4 --seed 3
run train "$SRC/inputs/smoke.toml" --set data.path="$work/syn.h5" --set run.out_dir="$work/teacher" \
  --set train.epochs=2 --set train.mfu_ceiling=1e11 > "$work/teacher.log"
"$PYTHON" "$SRC/tests/make_torchscript_teacher.py" "$work/teacher/checkpoint.h5" "$work/teacher.pt"
"$PYTHON" "$SRC/tests/make_torchscript_teacher.py" "$work/teacher/checkpoint.h5" "$work/teacher5.pt" --classes 5
"$PYTHON" "$SRC/tests/make_torchscript_teacher.py" "$work/teacher/checkpoint.h5" "$work/teacher32.pt" --fp32-only

student=(train "$SRC/inputs/smoke.toml" --set data.path="$work/syn.h5" --set run.mode=distill
         --set model.dim=16 --set model.depth=1 --set model.dist_token=true --set train.max_steps=6
         --set train.mfu_ceiling=1e11)
run "${student[@]}" --set precision.compute=fp32 --set run.out_dir="$work/from_ts" \
  --set teacher.torchscript="$work/teacher.pt" > "$work/from_ts.log"
run "${student[@]}" --set precision.compute=fp32 --set run.out_dir="$work/from_ckpt" \
  --set teacher.checkpoint="$work/teacher/checkpoint.h5" > "$work/from_ckpt.log"
grep -q "teacher: TorchScript module $work/teacher.pt (18404 parameters, fp32" "$work/from_ts.log"
# bf16 (the default compute): the module runs under bf16 autocast, which
# changes its logits (a nonzero difference from fp32 on the dummy batch).
run "${student[@]}" --set run.out_dir="$work/from_ts_bf16" --set teacher.torchscript="$work/teacher.pt" \
  > "$work/from_ts_bf16.log"
grep -q "teacher: TorchScript module .*bf16 autocast" "$work/from_ts_bf16.log"
grep "under bf16 autocast: dummy-batch logits differ from fp32 by" "$work/from_ts_bf16.log"
if grep -q "differ from fp32 by 0.00e+00" "$work/from_ts_bf16.log"; then
  echo "FAIL: bf16 autocast did not reach the TorchScript teacher"; exit 1
fi
# A module that fails under bf16 autocast runs in fp32, and the log says so.
run "${student[@]}" --set run.out_dir="$work/from_ts32" --set teacher.torchscript="$work/teacher32.pt" \
  > "$work/from_ts32.log"
grep -q "does not run under bf16 autocast (.*only runs in float32); running it in fp32" "$work/from_ts32.log"
grep -q "teacher: TorchScript module .*fp32: bf16 failed" "$work/from_ts32.log"

"$PYTHON" - "$work" <<'PY'
import json, sys, h5py, numpy as np
work = sys.argv[1]
a, b = h5py.File(f"{work}/from_ts/checkpoint.h5", "r"), h5py.File(f"{work}/from_ckpt/checkpoint.h5", "r")
names = sorted(a["model"].keys())
assert names == sorted(b["model"].keys()) and len(names) > 10, names
def max_diff(a, b):
    return max(float(np.abs(a["model"][n][()] - b["model"][n][()]).max()) for n in names)
worst = max_diff(a, b)
scale = max(float(np.abs(b["model"][n][()]).max()) for n in names)
ra, rb = (json.load(open(f"{work}/{d}/result.json")) for d in ("from_ts", "from_ckpt"))
assert ra["steps"] == rb["steps"] == 6, (ra["steps"], rb["steps"])
assert ra["teacher_parameters"] == rb["teacher_parameters"] == 18404
assert abs(ra["final_loss"] - rb["final_loss"]) <= 1e-5, (ra["final_loss"], rb["final_loss"])
print(f"student from TorchScript vs from checkpoint: max |weight difference| {worst:.3e} "
      f"(weights up to {scale:.3f}), final loss {ra['final_loss']:.6f} vs {rb['final_loss']:.6f}")
assert worst <= 1e-5, f"students differ by {worst}"
PY

# Wrong class count: one line, exit 2, naming the file and both shapes.
set +e
run "${student[@]}" --set run.out_dir="$work/bad" --set teacher.torchscript="$work/teacher5.pt" \
  > "$work/bad.out" 2>&1
rc=$?
set -e
want="teacher.torchscript '$work/teacher5.pt' maps float [2,1,16,16] to [2,5], expected logits [2,4]"
if [ "$rc" -ne 2 ] || ! grep -qF "$want" "$work/bad.out"; then
  echo "FAIL: wrong-class TorchScript teacher: exit $rc, output:"; cat "$work/bad.out"; exit 1
fi
[ "$(grep -c '^vitkd: error:' "$work/bad.out")" -eq 1 ]
echo "OK: TorchScript teacher == checkpoint teacher; wrong class count -> exit 2"
