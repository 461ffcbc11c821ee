#!/usr/bin/env bash
# precision.gather at NP ranks: in bf16 the sharded step gathers the
# parameters as a bf16 copy the forward pass reads (optim/compute_copy.hpp).
# "setup" makes the data, a teacher and the configuration (bf16 by name, so
# that it runs on any CPU); then:
#   copy_equals_autocast              distillation with sifting, the separate ranking pass and
#                                     step evaluations, once with the copy ("auto") and once
#                                     with fp32 gathers: bitwise the same checkpoint (model and
#                                     optimizer), losses and evaluations; result.json and
#                                     timing.h5 name the gather and its bytes, fewer with the copy;
#                                     the start-up lines name the copy and the teacher's one cast
#   copy_resume_is_bit_identical      preempted and resumed with the copy == uninterrupted
#   fp32_compute_is_unchanged         precision.compute = "fp32": "auto" gathers fp32, the same
#                                     bytes and the same model as "fp32"
#   bf16_gather_with_fp32_compute_is_one_line
#                                     precision.gather = "bf16" in an fp32 run: exit 2, one line
#   e2e_compute_copy.sh --list | CASE NP ROOT    (tests/lib/common.sh)
source "$(dirname "$0")/../lib/common.sh"
CASES=(setup copy_equals_autocast:setup copy_resume_is_bit_identical:setup fp32_compute_is_unchanged:setup
       bf16_gather_with_fp32_compute_is_one_line:setup)
SETUP=${3-}/setup
G=12                             # global batch: 4 x 3 ranks, 6 x 2 ranks
B=$((G / ${2:-1}))
T=(train "$SETUP/tiny.toml" --set data.batch_size=$B)
D=("${T[@]}" --set run.mode=distill --set teacher.checkpoint="$SETUP/teacher/checkpoint.h5" --set model.dim=8
   --set sift.enabled=true --set sift.delay=5 --set sift.history=64 --set train.eval_every_steps=10)
export MPI_TIMEOUT=120

case_setup() {
  synthetic syn.h5 192 64 8 4 --seed 6
  tiny_config tiny.toml "data.path=\"$WORK/syn.h5\"" 'precision.compute="bf16"' train.max_steps=24 \
    train.timing_every_steps=5 checkpoint.every_steps=0 train.eval_every_epochs=0
  expect 0 vk "$NP" "${T[@]}" --set run.out_dir=teacher --set train.max_steps=16
}

# gather_facts DIR: result.json's gather and bytes per step, checked against timing.h5's.
gather_facts() {
  "$PYTHON" - "$1" <<'PY'
import h5py, json, sys
r = json.load(open(f"{sys.argv[1]}/result.json"))
with h5py.File(f"{sys.argv[1]}/timing.h5", "r") as f:
    logged = int(f.attrs["all_gather_bytes"])
assert logged == r["all_gather_bytes_per_step"], (logged, r["all_gather_bytes_per_step"])
print(r["gather"], logged)
PY
}

case_copy_equals_autocast() {
  expect 0 vk "$NP" "${D[@]}" --set run.out_dir=copy
  grep -q "parameters read from a bf16 copy" last.log || fail "the start-up line does not name the bf16 copy"
  grep -q "teacher: .*; its fp32 matrix weights cast to bf16 once, at load" last.log ||
    fail "no start-up line saying the teacher's weights were cast once"
  expect 0 vk "$NP" "${D[@]}" --set run.out_dir=fp32 --set precision.gather=fp32
  grep -q "parameters fp32" last.log || fail "precision.gather = fp32: the start-up line does not say fp32"
  cmp_ckpt fp32/checkpoint.h5 copy/checkpoint.h5 --exact
  "$PYTHON" - <<'PY'
import h5py, json
a, b = json.load(open("fp32/result.json")), json.load(open("copy/result.json"))
for k in ("steps", "samples_trained", "test_top1", "final_loss", "kept_fraction"):
    assert a[k] == b[k], (k, a[k], b[k])
with h5py.File("fp32/timing.h5", "r") as fa, h5py.File("copy/timing.h5", "r") as fb:
    for d in ("metrics/loss", "eval/test_top1"):
        assert (fa[d][()] == fb[d][()]).all(), d
PY
  local g1 b1 g2 b2
  read -r g1 b1 < <(gather_facts copy) || fail "copy: result.json and timing.h5 disagree"
  read -r g2 b2 < <(gather_facts fp32) || fail "fp32: result.json and timing.h5 disagree"
  [ "$g1" = bf16 ] && [ "$g2" = fp32 ] || fail "gather recorded as $g1 and $g2"
  # This model is mostly norms and tokens, which stay fp32: fewer bytes, not half (ViT-S/16: 0.505).
  [ "$b1" -lt "$b2" ] && [ $((2 * b1)) -gt "$b2" ] || fail "all-gather bytes $b1 with the copy, $b2 without"
  echo "all-gather bytes per step: $b1 with the bf16 copy, $b2 in fp32"
}

case_copy_resume_is_bit_identical() {
  expect 0 vk "$NP" "${D[@]}" --set run.out_dir=full
  expect 75 vk "$NP" VITKD_TEST_PREEMPT_AT_STEP=7 "${D[@]}" --set run.out_dir=cut
  expect 0 vk "$NP" "${D[@]}" --set run.out_dir=cut
  grep -q "resume: from cut/checkpoint.h5" last.log || fail "did not resume"
  cmp_ckpt full/checkpoint.h5 cut/checkpoint.h5 --exact
}

case_fp32_compute_is_unchanged() {
  expect 0 vk "$NP" "${T[@]}" --set run.out_dir=auto --set precision.compute=fp32
  expect 0 vk "$NP" "${T[@]}" --set run.out_dir=fp32 --set precision.compute=fp32 --set precision.gather=fp32
  cmp_ckpt fp32/checkpoint.h5 auto/checkpoint.h5 --exact
  local g1 b1 g2 b2
  read -r g1 b1 < <(gather_facts auto) || fail "auto: result.json and timing.h5 disagree"
  read -r g2 b2 < <(gather_facts fp32) || fail "fp32: result.json and timing.h5 disagree"
  [ "$g1" = fp32 ] && [ "$b1" = "$b2" ] || fail "fp32 compute: gather $g1 with $b1 bytes, $b2 with fp32"
}

case_bf16_gather_with_fp32_compute_is_one_line() {
  expect_error 2 "precision.gather" vk "$NP" "${T[@]}" --set run.out_dir=bad --set precision.compute=fp32 \
    --set precision.gather=bf16
  grep -q 'set precision.gather = "auto" or precision.compute = "bf16"' last.log || fail "no fix in the message"
}

e2e_main "$@"
