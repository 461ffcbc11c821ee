#!/usr/bin/env bash
# Teacher from TorchScript (teacher.torchscript), at 2 ranks. "setup" trains a
# vitkd teacher and rebuilds it in PyTorch (analysis/vitkd_model.py), scripted
# and saved with torch.jit.save (tests/tools/make_torchscript_teacher.py):
# as is, with a 5-class head, and wrapped to fail unless run in fp32. Then:
#   student_equals_checkpoint_teacher_student   distilling from the TorchScript file gives the
#                                               same student as from the checkpoint (fp32 compute)
#   bf16_autocast_reaches_the_module            under bf16 compute the module runs under autocast
#                                               (its dummy-batch logits differ from fp32)
#   fp32_only_module_falls_back_to_fp32         a module that fails under bf16 autocast runs in
#                                               fp32, and the log says so
#   wrong_class_count_is_refused                exit 2, one line naming the file and both shapes
#   teacher_cnn_script_teaches_in_vitkd         experiments/distillation/teacher_cnn.py on a file with a validation
#                                               split: its TorchScript teaches a vitkd student, and
#                                               vitkd measures the teacher's test top-1 the script
#                                               recorded (the same normalisation), to 1/64
#   e2e_torchscript_teacher.sh --list | CASE NP ROOT    (tests/lib/common.sh)
source "$(dirname "$0")/../lib/common.sh"
CASES=(setup student_equals_checkpoint_teacher_student:setup bf16_autocast_reaches_the_module:setup
       fp32_only_module_falls_back_to_fp32:setup wrong_class_count_is_refused:setup
       teacher_cnn_script_teaches_in_vitkd)

SETUP=${3-}/setup
export MPI_TIMEOUT=300
student=(train "$SRC/inputs/smoke.toml" --set data.path="$SETUP/syn.h5" --set run.mode=distill
         --set model.dim=16 --set model.depth=1 --set model.dist_token=true --set train.max_steps=6
         --set train.mfu_ceiling=1e11)

case_setup() {
  synthetic syn.h5 256 64 16 4 --seed 3
  LOG=teacher.log expect 0 vk "$NP" train "$SRC/inputs/smoke.toml" --set data.path="$WORK/syn.h5" \
    --set run.out_dir=teacher --set train.epochs=2 --set train.mfu_ceiling=1e11
  local make=("$PYTHON" "$SRC/tests/tools/make_torchscript_teacher.py" teacher/checkpoint.h5)
  "${make[@]}" teacher.pt
  "${make[@]}" teacher5.pt --classes 5
  "${make[@]}" teacher32.pt --fp32-only
}

case_student_equals_checkpoint_teacher_student() {
  LOG=from_ts.log expect 0 vk "$NP" "${student[@]}" --set precision.compute=fp32 --set run.out_dir=from_ts \
    --set teacher.torchscript="$SETUP/teacher.pt"
  LOG=from_ckpt.log expect 0 vk "$NP" "${student[@]}" --set precision.compute=fp32 --set run.out_dir=from_ckpt \
    --set teacher.checkpoint="$SETUP/teacher/checkpoint.h5"
  grep -q "teacher: TorchScript module $SETUP/teacher.pt (18404 parameters, fp32" from_ts.log \
    || { cat from_ts.log; fail "no TorchScript teacher line"; }
  "$PYTHON" - <<'PY'
import json, h5py, numpy as np
a, b = h5py.File("from_ts/checkpoint.h5", "r"), h5py.File("from_ckpt/checkpoint.h5", "r")
names = sorted(a["model"].keys())
assert names == sorted(b["model"].keys()) and len(names) > 10, names
worst = max(float(np.abs(a["model"][n][()] - b["model"][n][()]).max()) for n in names)
scale = max(float(np.abs(b["model"][n][()]).max()) for n in names)
ra, rb = (json.load(open(f"{d}/result.json")) for d in ("from_ts", "from_ckpt"))
assert ra["steps"] == rb["steps"] == 6, (ra["steps"], rb["steps"])
assert ra["teacher_parameters"] == rb["teacher_parameters"] == 18404
assert abs(ra["final_loss"] - rb["final_loss"]) <= 1e-5, (ra["final_loss"], rb["final_loss"])
print(f"student from TorchScript vs from checkpoint: max |weight difference| {worst:.3e} "
      f"(weights up to {scale:.3f}), final loss {ra['final_loss']:.6f} vs {rb['final_loss']:.6f}")
assert worst <= 1e-5, f"students differ by {worst}"
PY
}

case_bf16_autocast_reaches_the_module() {
  # bf16 compute, asked for by name (auto picks fp32 on a CPU without native
  # bf16): the module runs under bf16 autocast, which changes its logits (a
  # nonzero difference from fp32 on the dummy batch).
  LOG=from_ts_bf16.log expect 0 vk "$NP" "${student[@]}" --set precision.compute=bf16 --set run.out_dir=from_ts_bf16 \
    --set teacher.torchscript="$SETUP/teacher.pt"
  grep -q "teacher: TorchScript module .*bf16 autocast" from_ts_bf16.log || { cat from_ts_bf16.log; fail "not under autocast"; }
  grep "under bf16 autocast: dummy-batch logits differ from fp32 by" from_ts_bf16.log \
    || fail "no logit difference reported"
  if grep -q "differ from fp32 by 0.00e+00" from_ts_bf16.log; then
    fail "bf16 autocast did not reach the TorchScript teacher"
  fi
}

case_fp32_only_module_falls_back_to_fp32() {
  LOG=from_ts32.log expect 0 vk "$NP" "${student[@]}" --set precision.compute=bf16 --set run.out_dir=from_ts32 \
    --set teacher.torchscript="$SETUP/teacher32.pt"
  grep -q "does not run under bf16 autocast (.*only runs in float32); running it in fp32" from_ts32.log \
    || { cat from_ts32.log; fail "no fallback message"; }
  grep -q "teacher: TorchScript module .*fp32: bf16 failed" from_ts32.log || fail "no fp32 teacher line"
}

case_wrong_class_count_is_refused() {
  expect_error 2 "teacher.torchscript '$SETUP/teacher5.pt' maps float [2,1,16,16] to [2,5], expected logits [2,4]" \
    vk "$NP" "${student[@]}" --set run.out_dir=bad --set teacher.torchscript="$SETUP/teacher5.pt"
  [ "$(grep -c '^vitkd: error:' last.log)" -eq 1 ] || fail "not exactly one error line"
}

case_teacher_cnn_script_teaches_in_vitkd() {
  synthetic val.h5 320 64 16 4 --seed 3 --val-fraction 0.2
  # A width whose convolutions PyTorch 1.13's oneDNN corrupts on AVX2: one line, exit 2, nothing written.
  LOG=narrow.log expect 2 "$PYTHON" "$SRC/experiments/distillation/teacher_cnn.py" --data val.h5 --out narrow.pt --json narrow.json --width 4
  [ "$(wc -l < narrow.log)" -eq 1 ] && grep -q "^teacher_cnn.py: --width 4: use 8 or more" narrow.log \
    || { cat narrow.log; fail "not one line naming the width"; }
  [ ! -e narrow.pt ] && [ ! -e narrow.json ] || fail "a refused width wrote a file"
  "$PYTHON" "$SRC/experiments/distillation/teacher_cnn.py" --data val.h5 --out cnn.pt --json cnn.json --epochs 3 --width 8 \
    --batch 32 --lr 0.05 --threads 1 > cnn.log 2>&1 || { cat cnn.log; fail "experiments/distillation/teacher_cnn.py failed"; }
  LOG=student.log expect 0 vk "$NP" "${student[@]}" --set data.path="$WORK/val.h5" --set run.out_dir=student \
    --set data.eval_split=val --set teacher.torchscript="$WORK/cnn.pt" --set distill.kind=hard \
    --set distill.eval_agreement=true
  "$PYTHON" - <<'PY'
import json
t, r = json.load(open("cnn.json")), json.load(open("student/result.json"))
assert t["test_top1"] > 0.6, f"the convnet did not learn the data: {t}"
assert 0 < t["val_top1"] <= 1 and t["epoch_kept"] in (1, 2, 3) and len(t["val_top1_per_epoch"]) == 3
# The check can fail: fed pixels / 255 without the file's mean and std, the teacher scores otherwise.
import h5py, numpy as np, torch
with h5py.File("val.h5") as f:
    x = torch.from_numpy(f["test/images"][()].astype(np.float32).transpose(0, 3, 1, 2) / 255.0)
    y = torch.from_numpy(f["test/labels"][()].astype(np.int64))
with torch.no_grad():
    unnormalised = float((torch.jit.load("cnn.pt")(x).argmax(-1) == y).float().mean())
assert abs(unnormalised - t["test_top1"]) > 1 / 64, ("insensitive", unnormalised, t["test_top1"])
# vitkd feeds the teacher its own normalisation (and bf16 autocast): the same test top-1 within a sample.
assert abs(r["teacher_test_top1"] - t["test_top1"]) <= 1 / 64 + 1e-9, (r["teacher_test_top1"], t["test_top1"])
print(f"OK: the convnet's test top-1 {t['test_top1']:.4f} in the script, {r['teacher_test_top1']:.4f} in vitkd "
      f"({unnormalised:.4f} unnormalised)")
PY
}

PYTHON_MODULES=(h5py numpy torch)
e2e_main "$@"
