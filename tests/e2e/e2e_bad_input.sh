#!/usr/bin/env bash
# Every bad input gets one clear error line, a non-zero exit, no crash and no
# hang (tests/lib/common.sh: expect_error), and leaves an earlier run's
# outputs untouched. At 2 ranks. "setup" makes the data, broken variants of
# it and a 5-class teacher; each other case is one bad input (the case names
# say which and what must happen).
#   e2e_bad_input.sh --list | CASE NP ROOT
source "$(dirname "$0")/../lib/common.sh"
CASES=(setup)
for c in unknown_key_in_file_names_the_nearest unknown_key_in_override_names_the_nearest \
         wrong_type_names_key_and_type zero_batch_size_is_refused zero_depth_is_refused \
         heads_not_dividing_dim_are_refused patch_not_dividing_image_is_refused mode_typo_names_the_nearest \
         missing_config_file_is_refused invalid_toml_is_refused missing_dataset_is_refused \
         truncated_dataset_is_refused dataset_cut_short_at_the_end_is_refused \
         float_labels_are_refused images_of_wrong_rank_are_refused label_out_of_range_is_refused \
         empty_split_is_refused dataset_smaller_than_a_global_batch_is_refused \
         label_count_mismatch_is_refused string_format_version_is_refused \
         group_in_place_of_a_dataset_is_refused image_size_mismatch_names_the_key \
         class_count_mismatch_names_the_key missing_teacher_checkpoint_is_refused \
         teacher_that_is_not_a_checkpoint_is_refused teacher_of_other_class_count_is_refused \
         teacher_of_other_image_size_is_refused teacher_weights_of_other_shape_are_refused \
         unwritable_out_dir_is_refused world_size_other_than_slurm_ntasks_is_refused \
         nccl_without_gpu_is_refused negative_sift_beta_is_refused zero_sift_history_is_refused \
         scope_teacher_with_kd_criterion_is_refused scope_teacher_without_distill_is_refused \
         scope_typo_names_the_nearest unknown_command_names_the_nearest set_without_equals_is_refused \
         unknown_dataset_kind_is_refused negative_sift_history_is_refused \
         more_threads_than_cores_per_rank_are_refused data_io_typo_names_the_nearest \
         device_cuda_without_cuda_is_refused_once nccl_on_the_cpu_is_refused device_typo_names_the_nearest \
         negative_label_smoothing_is_refused bf16_reduce_without_sharding_is_refused \
         crop_ranges_out_of_bounds_are_refused pad_crop_at_another_size_is_refused \
         drop_path_of_one_is_refused policy_and_mixing_out_of_range_or_unaugmented_are_refused \
         val_fraction_outside_the_range_is_refused \
         eval_split_val_without_a_val_split_is_refused eval_split_typo_names_the_nearest; do
  CASES+=("$c:setup")
done

SETUP=${3-}/setup
export MPI_TIMEOUT=60
base=(train "$SRC/inputs/smoke.toml" --set data.path="$SETUP/syn.h5" --set train.epochs=1)

case_setup() {
  synthetic syn.h5 256 64 16 4
  # An earlier run whose outputs every case must leave as they are.
  mkdir -p prev
  echo '{"earlier": true}' > prev/result.json
  echo 'earlier checkpoint' > prev/checkpoint.h5
  "$PYTHON" - "$WORK" <<'PY'
import h5py, numpy as np, sys, shutil
w = sys.argv[1]
def variant(name, fn):
    shutil.copy(f"{w}/syn.h5", f"{w}/{name}.h5")
    with h5py.File(f"{w}/{name}.h5", "r+") as f:
        fn(f)
def wrong_dtype(f):
    lab = f["train/labels"][()]
    del f["train/labels"]; f["train/labels"] = lab.astype(np.float32)
def wrong_rank(f):
    img = f["train/images"][()]
    del f["train/images"]; f["train/images"] = img.reshape(img.shape[0], -1)
def out_of_range(f):
    lab = f["train/labels"][()]; lab[5] = 9
    f["train/labels"][...] = lab
def empty_split(f):
    del f["test/images"]; del f["test/labels"]
    f["test/images"] = np.zeros((0, 16, 16, 1), np.uint8); f["test/labels"] = np.zeros((0,), np.int32)
def tiny(f):
    img, lab = f["train/images"][:20], f["train/labels"][:20]
    del f["train/images"]; del f["train/labels"]
    f["train/images"] = img; f["train/labels"] = lab
def label_count(f):
    lab = f["train/labels"][:-1]
    del f["train/labels"]; f["train/labels"] = lab
def attr_type(f):
    f.attrs["format_version"] = "1"
def group_not_dataset(f):
    del f["test/images"]; f.create_group("test/images")
for n, fn in [("wrong_dtype", wrong_dtype), ("wrong_rank", wrong_rank), ("out_of_range", out_of_range),
              ("empty_split", empty_split), ("tiny", tiny), ("label_count", label_count),
              ("attr_type", attr_type), ("group_not_dataset", group_not_dataset)]:
    variant(n, fn)
PY
  synthetic syn5.h5 128 32 16 5
  LOG=t5.log expect 0 vk 2 train "$SRC/inputs/smoke.toml" --set data.path="$WORK/syn5.h5" --set model.classes=5 \
    --set train.max_steps=2 --set run.out_dir="$WORK/t5"
  synthetic syn8.h5 128 32 8 4
  # A teacher whose header matches the data but whose weights have another shape.
  cp t5/checkpoint.h5 t5_relabel.h5
  "$PYTHON" -c 'import h5py, sys; f = h5py.File(sys.argv[1], "r+"); f.attrs["model_classes"] = 4; f.close()' \
    t5_relabel.h5
}

# refused MESSAGE [NAME=VALUE ...] ARG ...: `vitkd train` of the base
# configuration plus ARG at 2 ranks (NAME=VALUE in their environment), into a
# copy of the earlier run's directory, is exit 2 with MESSAGE, and the
# earlier outputs are unchanged.
refused() {
  local message=$1
  shift
  leading_envs "$@"
  local envs=("${ENVS[@]}")
  shift ${#envs[@]}
  cp -r "$SETUP/prev" prev
  local before
  before=$(cat prev/* | md5sum)
  expect_error 2 "$message" vk 2 "${envs[@]}" "${base[@]}" --set run.out_dir="$WORK/prev" "$@"
  if [ "$before" != "$(cat prev/* | md5sum)" ] || [ "$(ls prev)" != "$(printf 'checkpoint.h5\nresult.json')" ]; then
    ls -la prev
    fail "an earlier run's outputs were changed"
  fi
}

case_unknown_key_in_file_names_the_nearest() {
  printf '[optim]\nweight_decy = 0.1\n' > unknown.toml
  expect_error 2 "unknown configuration key 'optim.weight_decy' (did you mean 'optim.weight_decay'?)" \
    vk 2 train "$WORK/unknown.toml"
}
case_unknown_key_in_override_names_the_nearest() { refused "did you mean 'model.depth'" --set model.detph=2; }
case_wrong_type_names_key_and_type() { refused "'data.batch_size' must be an integer" --set data.batch_size='"x"'; }
case_zero_batch_size_is_refused() { refused "data.batch_size" --set data.batch_size=0; }
case_bf16_reduce_without_sharding_is_refused() {
  refused 'precision.reduce = "fp32" or dist.sharding = "zero1"' --set precision.reduce=bf16 --set dist.sharding=none
}
case_zero_depth_is_refused() { refused "model.depth" --set model.depth=0; }
case_heads_not_dividing_dim_are_refused() { refused "heads do not divide dim" --set model.heads=5; }
case_patch_not_dividing_image_is_refused() { refused "does not divide image_size" --set model.patch=5; }
case_mode_typo_names_the_nearest() { refused "did you mean 'distill'" --set run.mode=distil; }
case_missing_config_file_is_refused() {
  expect_error 2 "cannot read configuration file" vk 2 train "$WORK/nope.toml"
}
case_invalid_toml_is_refused() { expect_error 2 "invalid TOML" vk 2 train "$SRC/tests/e2e/e2e_bad_input.sh"; }
case_missing_dataset_is_refused() {
  refused "cannot read dataset '$WORK/missing.h5'" --set data.path="$WORK/missing.h5"
}
case_truncated_dataset_is_refused() {
  head -c 3000 "$SETUP/syn.h5" > truncated.h5
  refused "truncated or corrupt" --set data.path="$WORK/truncated.h5"
}
case_dataset_cut_short_at_the_end_is_refused() {
  # Only the end cut off: the superblock is intact, HDF5 itself finds the
  # file short, and its message reaches the one error line.
  head -c $(( $(stat -c %s "$SETUP/syn.h5") - 4096 )) "$SETUP/syn.h5" > truncated_tail.h5
  refused "truncated file" --set data.path="$WORK/truncated_tail.h5"
}
case_float_labels_are_refused() {
  refused "'/train/labels' is float32 [256], expected int32 [N]" --set data.path="$SETUP/wrong_dtype.h5"
}
case_images_of_wrong_rank_are_refused() {
  refused "'/train/images' is uint8 [256,256], expected uint8 [N,H,W,C]" --set data.path="$SETUP/wrong_rank.h5"
}
case_label_out_of_range_is_refused() {
  refused "label 9 at /train/labels[5] is out of range [0, 4)" --set data.path="$SETUP/out_of_range.h5"
}
case_empty_split_is_refused() { refused "split 'test' is empty" --set data.path="$SETUP/empty_split.h5"; }
case_dataset_smaller_than_a_global_batch_is_refused() {
  refused "fewer than one global batch" --set data.path="$SETUP/tiny.h5"
}
case_label_count_mismatch_is_refused() {
  refused "'/train/images' has 256 images but '/train/labels' has 255 labels" --set data.path="$SETUP/label_count.h5"
}
# Layout errors HDF5 reports (a string where an integer belongs, a group where
# a dataset belongs) are user errors naming the file and object, not aborts.
case_string_format_version_is_refused() {
  refused "attribute 'format_version' must be an integer" --set data.path="$SETUP/attr_type.h5"
}
case_group_in_place_of_a_dataset_is_refused() {
  refused "'/test/images' is not a readable dataset (unable to open dataset" \
    --set data.path="$SETUP/group_not_dataset.h5"
}
case_image_size_mismatch_names_the_key() { refused "model.image_size = 28" --set model.image_size=28; }
# The random-resized crop's ranges; the pad crop needs images stored at model.image_size.
case_crop_ranges_out_of_bounds_are_refused() {
  refused "invalid value for 'data.crop_scale': must be two numbers [min, max] with 0 < min <= max <= 1" \
    --set 'data.crop_scale=[0.5, 1.5]'
  rm -rf prev
  refused "invalid value for 'data.crop_ratio': must be two numbers [min, max] with 0 < min <= max" \
    --set 'data.crop_ratio=[1.5, 0.5]'
  rm -rf prev
  refused "did you mean 'random_resized'" --set data.crop=random_resize
}
case_policy_and_mixing_out_of_range_or_unaugmented_are_refused() {
  refused "invalid value for 'data.mixup': the policy, random erasing, Mixup and CutMix are training augmentations and need" \
    --set data.mixup=0.8
  rm -rf prev
  refused "invalid value for 'data.cutmix': is the alpha of Beta(alpha, alpha) and must lie in [0, 1000]" \
    --set data.cutmix=-1 --set data.augment=true
  rm -rf prev
  refused "invalid value for 'data.random_erase': is a probability and must lie in [0, 1], got 1.5" \
    --set data.random_erase=1.5 --set data.augment=true
  rm -rf prev
  refused "invalid value for 'data.policy': \"trivialaugment\" is not one of \"none\", \"trivial_augment\"" \
    --set data.policy=trivialaugment --set data.augment=true
}
case_pad_crop_at_another_size_is_refused() {
  refused "the pad crop (data.crop = \"pad\") keeps the stored size: store them at 8" \
    --set model.image_size=8 --set model.patch=4 --set data.augment=true
}
case_class_count_mismatch_names_the_key() { refused "model.classes = 10 but" --set model.classes=10; }
# Teacher checkpoints: missing, not a checkpoint, and from a model of another class count.
case_missing_teacher_checkpoint_is_refused() {
  refused "cannot read checkpoint" --set run.mode=distill --set teacher.checkpoint="$WORK/none.h5"
}
case_teacher_that_is_not_a_checkpoint_is_refused() {
  refused "not a vitkd checkpoint" --set run.mode=distill --set teacher.checkpoint="$SETUP/syn.h5"
}
case_teacher_of_other_class_count_is_refused() {
  refused "teacher checkpoint $SETUP/t5/checkpoint.h5: classes = 5 but" \
    --set run.mode=distill --set teacher.checkpoint="$SETUP/t5/checkpoint.h5"
}
case_teacher_of_other_image_size_is_refused() {
  # A teacher trained on other images (16x16) than the data (8x8).
  refused "teacher checkpoint $SETUP/t5/checkpoint.h5: image_size = 16 but the images" \
    --set data.path="$SETUP/syn8.h5" --set model.image_size=8 \
    --set run.mode=distill --set teacher.checkpoint="$SETUP/t5/checkpoint.h5"
}
case_teacher_weights_of_other_shape_are_refused() {
  refused "'/model/head.weight' is float32 [5,32], but the model expects float32 [4,32]" \
    --set run.mode=distill --set teacher.checkpoint="$SETUP/t5_relabel.h5"
}
case_unwritable_out_dir_is_refused() {
  # An output directory that cannot be made (below a regular file; root ignores permissions).
  expect_error 2 "is not writable" vk 2 "${base[@]}" --set run.out_dir="$SETUP/syn.h5/sub"
}
case_world_size_other_than_slurm_ntasks_is_refused() {
  # The launcher's world size differs from Slurm's task count.
  refused "but SLURM_NTASKS=3" SLURM_NTASKS=3
  # An MPI without Slurm's PMI: every task a one-rank world. Task 0 says so
  # in one line; the others leave with the same code and print nothing.
  LOG=task0.log expect_error 2 "MPI world size is 1 but SLURM_NTASKS=2" \
    env SLURM_NTASKS=2 SLURM_PROCID=0 "$VITKD" train "$SRC/inputs/smoke.toml" --set run.out_dir="$WORK/t0"
  [ "$(grep -c 'vitkd: error' task0.log)" = 1 ] || { cat task0.log; fail "task 0: not one error line"; }
  LOG=task1.log expect 2 env SLURM_NTASKS=2 SLURM_PROCID=1 "$VITKD" train "$SRC/inputs/smoke.toml" \
    --set run.out_dir="$WORK/t1"
  [ ! -s task1.log ] || { cat task1.log; fail "task 1 of a one-rank world printed something"; }
}
case_nccl_without_gpu_is_refused() {
  # NCCL requested on a machine without a GPU (or a build without NCCL): one clear line.
  refused 'dist.backend = "nccl"' --set dist.backend=nccl
}
case_device_cuda_without_cuda_is_refused_once() {
  # Here LibTorch is CPU-only (or no GPU is visible): one line, from one rank.
  refused 'run.device = "cuda", but' --set run.device=cuda
  [ "$(grep -c 'run.device = "cuda", but' last.log)" -eq 1 ] || { cat last.log; fail "the error was printed more than once"; }
}
case_nccl_on_the_cpu_is_refused() {
  refused 'but this run computes on the CPU' --set run.device=cpu --set dist.backend=nccl
}
case_drop_path_of_one_is_refused() { refused "invalid value for 'model.drop_path': must lie in [0, 1)" --set model.drop_path=1.0; }
case_negative_label_smoothing_is_refused() { refused "invalid value for 'train.label_smoothing': must lie in [0, 1)" --set train.label_smoothing=-0.1; }
case_device_typo_names_the_nearest() { refused "did you mean 'cuda'" --set run.device=cudaa; }
case_negative_sift_beta_is_refused() { refused "sift.beta" --set sift.beta=-1; }
case_zero_sift_history_is_refused() { refused "sift.history" --set sift.history=0; }
case_negative_sift_history_is_refused() { refused "sift.history" --set sift.history=-5; }
case_more_threads_than_cores_per_rank_are_refused() {
  # One more thread than this machine's cores: more than any rank's share.
  refused "train.threads = $(($(nproc) + 1)) is more than the" --set train.threads=$(($(nproc) + 1))
}
case_data_io_typo_names_the_nearest() { refused "did you mean 'mpio'" --set data.io=mpi; }
case_scope_teacher_with_kd_criterion_is_refused() {
  refused 'needs sift.criterion = "ce"' --set sift.enabled=true --set sift.scope=teacher --set sift.criterion=kd
}
case_scope_teacher_without_distill_is_refused() {
  refused 'needs run.mode = "distill"' --set sift.enabled=true --set sift.scope=teacher
}
case_scope_typo_names_the_nearest() { refused "did you mean 'teacher'" --set sift.scope=teachr; }
# The command line.
case_unknown_command_names_the_nearest() { expect_error 2 "did you mean 'train'" "$VITKD" trian; }
case_set_without_equals_is_refused() {
  expect_error 2 "expected section.key=value" "$VITKD" "${base[@]}" --set nodot
}
# The validation split: a fraction outside (0, 0.5] is one line, on every rank's behalf, and no file.
case_val_fraction_outside_the_range_is_refused() {
  for f in 0 0.6 -0.1; do
    expect_error 2 "--val-fraction $(printf '%f' "$f") is outside (0, 0.5]" \
      vk 2 prepare synthetic --out "$WORK/v.h5" --train 64 --test 16 --val-fraction "$f"
    [ "$(grep -c 'is outside (0, 0.5]' last.log)" -eq 1 ] || { cat last.log; fail "not one line"; }
    [ ! -e "$WORK/v.h5" ] || fail "--val-fraction $f wrote $WORK/v.h5"
  done
}
case_eval_split_val_without_a_val_split_is_refused() {
  refused 'data.eval_split = "val" but '"$SETUP/syn.h5"' has no /val split; write one with `vitkd prepare' \
    --set data.eval_split=val
}
case_eval_split_typo_names_the_nearest() { refused "did you mean 'val'" --set data.eval_split=vall; }
case_unknown_dataset_kind_is_refused() {
  expect_error 2 "unknown dataset kind" "$VITKD" prepare mnist --out "$WORK/x.h5"
}

e2e_main "$@"
