#!/usr/bin/env bash
# Every bad input gets one clear error line, a non-zero exit, no hang, and
# leaves an earlier run's outputs untouched. Runs at 2 ranks.
#   bad_input.sh WORKDIR     (env: VITKD, MPIEXEC, MPIEXEC_NUMPROC_FLAG, SRC, PYTHON)
set -uo pipefail
work=$1
rm -rf "$work" && mkdir -p "$work"
fails=0
passes=0
run2() { timeout 60 $MPIEXEC $MPIEXEC_NUMPROC_FLAG 2 $MPIEXEC_PREFLAGS "$VITKD" "$@"; }

# expect NAME CODE PATTERN -- command...
expect() {
  local name=$1 code=$2 pattern=$3
  shift 4
  local out rc
  out=$("$@" 2>&1)
  rc=$?
  if [ "$rc" -ne "$code" ]; then
    echo "FAIL $name: exit $rc, expected $code"; echo "$out" | head -5; fails=$((fails+1)); return
  fi
  if ! grep -qF -- "$pattern" <<<"$out"; then
    echo "FAIL $name: message lacks '$pattern'"; echo "$out" | head -5; fails=$((fails+1)); return
  fi
  if grep -qE "terminate called|Segmentation fault|core dumped|Traceback|ERROR: AddressSanitizer|runtime error:" <<<"$out"; then
    echo "FAIL $name: crashed"; echo "$out" | head -5; fails=$((fails+1)); return
  fi
  # HDF5's own error-stack printing is off (h5_silence_errors); its errors
  # reach the one-line path instead.
  if grep -q "HDF5-DIAG" <<<"$out"; then
    echo "FAIL $name: HDF5 printed its error stack"; echo "$out" | head -5; fails=$((fails+1)); return
  fi
  if [ "$code" -ne 0 ] && [ "$(grep -c 'vitkd: error' <<<"$out")" -lt 1 ]; then
    echo "FAIL $name: no 'vitkd: error' line"; echo "$out" | head -5; fails=$((fails+1)); return
  fi
  echo "ok   $name: $(grep -m1 'vitkd: error' <<<"$out")"
  passes=$((passes+1))
}

"$VITKD" prepare synthetic --out "$work/syn.h5" --train 256 --test 64 --size 16 --classes 4 >/dev/null
base=(train "$SRC/inputs/smoke.toml" --set data.path="$work/syn.h5" --set train.epochs=1)

# An earlier run whose outputs must survive every failure below.
mkdir -p "$work/prev"
echo '{"earlier": true}' > "$work/prev/result.json"
echo 'earlier checkpoint' > "$work/prev/checkpoint.h5"
before=$(cat "$work/prev/"* | md5sum)
keep=(--set run.out_dir="$work/prev")

printf '[optim]\nweight_decy = 0.1\n' > "$work/unknown.toml"
expect unknown_key 2 "unknown configuration key 'optim.weight_decy' (did you mean 'optim.weight_decay'?)" -- \
  run2 train "$work/unknown.toml"
expect unknown_key_override 2 "did you mean 'model.depth'" -- run2 "${base[@]}" "${keep[@]}" --set model.detph=2
expect wrong_type 2 "'data.batch_size' must be an integer" -- run2 "${base[@]}" "${keep[@]}" --set data.batch_size='"x"'
expect zero_batch 2 "data.batch_size" -- run2 "${base[@]}" "${keep[@]}" --set data.batch_size=0
expect depth_zero 2 "model.depth" -- run2 "${base[@]}" "${keep[@]}" --set model.depth=0
expect heads_divide 2 "heads do not divide dim" -- run2 "${base[@]}" "${keep[@]}" --set model.heads=5
expect patch_divide 2 "does not divide image_size" -- run2 "${base[@]}" "${keep[@]}" --set model.patch=5
expect bad_mode 2 "did you mean 'distill'" -- run2 "${base[@]}" "${keep[@]}" --set run.mode=distil
expect missing_config 2 "cannot read configuration file" -- run2 train "$work/nope.toml"
expect bad_toml 2 "invalid TOML" -- run2 train "$SRC/tests/bad_input.sh"
expect missing_data 2 "cannot read dataset '$work/missing.h5'" -- \
  run2 "${base[@]}" "${keep[@]}" --set data.path="$work/missing.h5"

head -c 3000 "$work/syn.h5" > "$work/truncated.h5"
expect truncated_h5 2 "truncated or corrupt" -- run2 "${base[@]}" "${keep[@]}" --set data.path="$work/truncated.h5"
# Cut off only the end: the superblock is intact, HDF5 itself finds the
# file short, and its message reaches the one error line.
head -c $(( $(stat -c %s "$work/syn.h5") - 4096 )) "$work/syn.h5" > "$work/truncated_tail.h5"
expect truncated_tail_h5 2 "truncated file" -- run2 "${base[@]}" "${keep[@]}" --set data.path="$work/truncated_tail.h5"

"$PYTHON" - "$work" <<'PY'
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
expect wrong_dtype 2 "'/train/labels' is float32 [256], expected int32 [N]" -- \
  run2 "${base[@]}" "${keep[@]}" --set data.path="$work/wrong_dtype.h5"
expect wrong_rank 2 "'/train/images' is uint8 [256,256], expected uint8 [N,H,W,C]" -- \
  run2 "${base[@]}" "${keep[@]}" --set data.path="$work/wrong_rank.h5"
expect labels_out_of_range 2 "label 9 at /train/labels[5] is out of range [0, 4)" -- \
  run2 "${base[@]}" "${keep[@]}" --set data.path="$work/out_of_range.h5"
expect empty_split 2 "split 'test' is empty" -- run2 "${base[@]}" "${keep[@]}" --set data.path="$work/empty_split.h5"
expect smaller_than_batch 2 "fewer than one global batch" -- \
  run2 "${base[@]}" "${keep[@]}" --set data.path="$work/tiny.h5"
expect wrong_shape 2 "'/train/images' has 256 images but '/train/labels' has 255 labels" -- \
  run2 "${base[@]}" "${keep[@]}" --set data.path="$work/label_count.h5"
# Layout errors HDF5 reports (a string where an integer belongs, a group where
# a dataset belongs) are user errors naming the file and object, not aborts.
expect attr_wrong_type 2 "attribute 'format_version' must be an integer" -- \
  run2 "${base[@]}" "${keep[@]}" --set data.path="$work/attr_type.h5"
expect group_not_dataset 2 "'/test/images' is not a readable dataset (unable to open dataset" -- \
  run2 "${base[@]}" "${keep[@]}" --set data.path="$work/group_not_dataset.h5"
expect image_size_mismatch 2 "model.image_size = 28" -- run2 "${base[@]}" "${keep[@]}" --set model.image_size=28
expect class_mismatch 2 "model.classes = 10 but" -- run2 "${base[@]}" "${keep[@]}" --set model.classes=10

# Teacher checkpoints: missing, not a checkpoint, and from a model of another class count.
expect teacher_missing 2 "cannot read checkpoint" -- \
  run2 "${base[@]}" "${keep[@]}" --set run.mode=distill --set teacher.checkpoint="$work/none.h5"
expect teacher_not_ckpt 2 "not a vitkd checkpoint" -- \
  run2 "${base[@]}" "${keep[@]}" --set run.mode=distill --set teacher.checkpoint="$work/syn.h5"
"$VITKD" prepare synthetic --out "$work/syn5.h5" --train 128 --test 32 --size 16 --classes 5 >/dev/null
run2 train "$SRC/inputs/smoke.toml" --set data.path="$work/syn5.h5" --set model.classes=5 \
  --set train.max_steps=2 --set run.out_dir="$work/t5" >/dev/null 2>&1
expect teacher_classes 2 "teacher checkpoint $work/t5/checkpoint.h5: classes = 5 but" -- \
  run2 "${base[@]}" "${keep[@]}" --set run.mode=distill --set teacher.checkpoint="$work/t5/checkpoint.h5"
# A teacher trained on other images (16x16) than the data (8x8).
"$VITKD" prepare synthetic --out "$work/syn8.h5" --train 128 --test 32 --size 8 --classes 4 >/dev/null
expect teacher_image_size 2 "teacher checkpoint $work/t5/checkpoint.h5: image_size = 16 but the images" -- \
  run2 "${base[@]}" "${keep[@]}" --set data.path="$work/syn8.h5" --set model.image_size=8 \
  --set run.mode=distill --set teacher.checkpoint="$work/t5/checkpoint.h5"
# A teacher whose header matches the data but whose weights have another shape.
cp "$work/t5/checkpoint.h5" "$work/t5_relabel.h5"
"$PYTHON" -c 'import h5py, sys; f = h5py.File(sys.argv[1], "r+"); f.attrs["model_classes"] = 4; f.close()' \
  "$work/t5_relabel.h5"
expect teacher_weight_shape 2 "'/model/head.weight' is float32 [5,32], but the model expects float" -- \
  run2 "${base[@]}" "${keep[@]}" --set run.mode=distill --set teacher.checkpoint="$work/t5_relabel.h5"

# Output directory that cannot be created (below a regular file; root ignores permissions).
expect out_dir_unwritable 2 "is not writable" -- run2 "${base[@]}" --set run.out_dir="$work/syn.h5/sub"
# World size differs from the launcher's.
expect slurm_ntasks 2 "but SLURM_NTASKS=3" -- env SLURM_NTASKS=3 $MPIEXEC $MPIEXEC_NUMPROC_FLAG 2 \
  $MPIEXEC_PREFLAGS -x SLURM_NTASKS "$VITKD" "${base[@]}" "${keep[@]}"
# NCCL requested on a machine without a GPU (or a build without NCCL): one clear line.
expect nccl_without_gpu 2 'dist.backend = "nccl"' -- run2 "${base[@]}" "${keep[@]}" --set dist.backend=nccl
expect bad_beta 2 "sift.beta" -- run2 "${base[@]}" "${keep[@]}" --set sift.beta=-1
expect zero_history 2 "sift.history" -- run2 "${base[@]}" "${keep[@]}" --set sift.history=0
expect scope_kd 2 'needs sift.criterion = "ce"' -- run2 "${base[@]}" "${keep[@]}" --set sift.enabled=true \
  --set sift.scope=teacher --set sift.criterion=kd
expect scope_mode 2 'needs run.mode = "distill"' -- run2 "${base[@]}" "${keep[@]}" --set sift.enabled=true \
  --set sift.scope=teacher
expect scope_typo 2 "did you mean 'teacher'" -- run2 "${base[@]}" "${keep[@]}" --set sift.scope=teachr
# Command line.
expect unknown_command 2 "did you mean 'train'" -- "$VITKD" trian
expect bad_set 2 "expected section.key=value" -- "$VITKD" "${base[@]}" --set nodot
expect prepare_kind 2 "unknown dataset kind" -- "$VITKD" prepare mnist --out "$work/x.h5"

after=$(cat "$work/prev/"* | md5sum)
if [ "$before" != "$after" ] || [ "$(ls "$work/prev")" != "$(printf 'checkpoint.h5\nresult.json')" ]; then
  echo "FAIL: an earlier run's outputs were changed"; ls -la "$work/prev"; fails=$((fails+1))
else
  echo "ok   earlier outputs untouched"; passes=$((passes+1))
fi
echo "$passes passed, $fails failed"
[ "$fails" -eq 0 ]
