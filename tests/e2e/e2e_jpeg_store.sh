#!/usr/bin/env bash
# Photos kept as JPEG bytes in the dataset file (`vitkd prepare folder --store
# jpeg`, data/image_store.hpp), small enough for CI: 48 generated photos
# (jobs/lib/make_photos.py) stored at 40 x 40, a one-block ViT at 32 x 32 with
# patch 8, the random-resized crop, flips, TrivialAugment, erasing, Mixup and
# CutMix (ALL below). "setup" prepares the folder raw and as JPEG and trains a
# teacher on the JPEG file. Then:
#   stored_as_jpeg                 the file's layout and format version 2, its size below the raw
#                                  file's, `vitkd inspect` naming the storage, 1 rank writing the
#                                  same bytes as NP ranks, and every decoded image within JPEG's
#                                  error of the raw store (mean under 4 grey levels)
#   cached_views_equal_live        `vitkd teacher-cache` on the JPEG file: a student replaying it
#                                  trains as the student with the live teacher, bit for bit
#   ranks_train_on_the_same_views  1 rank and NP ranks: the same weights (fp32, rtol 1e-5)
#   resume_is_bit_exact            preempted at step 7 and resumed: the weights of one run; and
#                                  data.io = "mpio" against the same run read serially (the
#                                  prefetch thread): the same weights, bitwise
#   bad_input_one_line             --store png, --quality 0: one line, exit 2; a sample
#                                  whose bytes are damaged inside the file: training stops with
#                                  one line naming the split and the sample, exit 2
#   e2e_jpeg_store.sh --list | CASE NP ROOT    (tests/lib/common.sh)
source "$(dirname "$0")/../lib/common.sh"
CASES=(setup stored_as_jpeg:setup cached_views_equal_live:setup ranks_train_on_the_same_views:setup
       resume_is_bit_exact:setup bad_input_one_line:setup)

SETUP=${3-}/setup
G=6                              # global batch: 3 x 2 ranks, 6 x 1 rank
SMALL=("data.path=\"$SETUP/jpeg.h5\"" model.image_size=32 model.channels=3 model.patch=8 model.dim=16
       model.heads=2 model.classes=4 data.augment=true 'data.crop="random_resized"' train.epochs=2
       checkpoint.every_steps=0 train.log_every_steps=6)
ALL=('data.policy="trivial_augment"' data.random_erase=0.25 data.mixup=0.8 data.cutmix=1.0)

# small_config FILE RANKS [KEY=VALUE ...]: the one-block 32x32 model on jpeg.h5.
small_config() {
  local file=$1 n=$2
  shift 2
  tiny_config "$file" "${SMALL[@]}" data.batch_size=$((G / n)) "$@"
}

case_setup() {
  "$PYTHON" "$SRC/jobs/lib/make_photos.py" "$WORK/images" --per-class 12 --seed 4 > /dev/null
  local P=(prepare folder "$WORK/images" --size 40 --test-fraction 0.25 --seed 5)
  LOG=raw.log expect 0 vk "$NP" "${P[@]}" --out "$WORK/raw.h5"
  LOG=jpeg.log expect 0 vk "$NP" "${P[@]}" --out "$WORK/jpeg.h5" --store jpeg --quality 90
  LOG=jpeg1.log expect 0 vk 1 "${P[@]}" --out "$WORK/jpeg1.h5" --store jpeg
  grep -q "JPEG quality 90, [0-9]* bytes" jpeg.log || { cat jpeg.log; fail "prepare does not say it stored JPEG"; }
  small_config teacher.toml "$NP" 'run.out_dir="teacher"'
  LOG=teacher.log expect 0 vk "$NP" train teacher.toml
}

case_stored_as_jpeg() {
  LOG=inspect.log expect 0 "$VITKD" inspect "$SETUP/jpeg.h5"
  grep -q "storage: jpeg (format version 2), quality 90, [0-9]* bytes of JPEG" inspect.log ||
    { cat inspect.log; fail "inspect does not show the JPEG storage"; }
  "$PYTHON" - "$SETUP" <<'PY'
import io, os, sys
import h5py, numpy as np
from PIL import Image
s = sys.argv[1]
with h5py.File(f"{s}/raw.h5", "r") as r, h5py.File(f"{s}/jpeg.h5", "r") as j, h5py.File(f"{s}/jpeg1.h5", "r") as j1:
    assert j.attrs["storage"] in ("jpeg", b"jpeg") and int(j.attrs["format_version"]) == 2
    assert int(r.attrs["format_version"]) == 1 and "storage" not in r.attrs
    assert "train/images" not in j and int(j.attrs["jpeg_quality"]) == 90
    for split in ("train", "test"):
        # NP ranks wrote what one rank writes.
        for d in ("jpeg", "jpeg_offsets", "labels"):
            assert np.array_equal(j[f"{split}/{d}"][()], j1[f"{split}/{d}"][()]), (split, d)
        raw, b, off = r[f"{split}/images"][()], j[f"{split}/jpeg"][()], j[f"{split}/jpeg_offsets"][()]
        assert len(off) == len(raw) + 1 and off[0] == 0 and off[-1] == len(b) and (np.diff(off) > 0).all()
        assert np.array_equal(r[f"{split}/labels"][()], j[f"{split}/labels"][()])
        # Any JPEG decoder reads the bytes (PIL here), within JPEG's error of the raw store.
        dec = np.stack([np.asarray(Image.open(io.BytesIO(b[off[i]:off[i + 1]].tobytes())).convert("RGB"))
                        for i in range(len(raw))])
        err = np.abs(dec.astype(np.int32) - raw).mean()
        assert dec.shape == raw.shape and 0 < err < 4, (split, dec.shape, err)
        print(f"OK: {split}: {len(raw)} JPEGs, {len(b)} bytes for {raw.size} raw, mean error {err:.2f} grey levels")
    # The generator's photos are per-pixel noise (JPEG's worst case): only smaller here; real photos: ~1/5 and less.
    assert os.path.getsize(f"{s}/jpeg.h5") < os.path.getsize(f"{s}/raw.h5")
PY
}

case_cached_views_equal_live() {
  local T=(run.mode='"distill"' "teacher.checkpoint=\"$SETUP/teacher/checkpoint.h5\"" run.seed=7
           distill.cache_top_k=4 "distill.teacher_cache_file=\"$WORK/views.h5\"" "${ALL[@]}")
  small_config live.toml "$NP" "${T[@]}" 'run.out_dir="live"'
  small_config replay.toml "$NP" "${T[@]}" 'run.out_dir="replay"' distill.teacher_cache=true
  LOG=write.log expect 0 vk "$NP" teacher-cache live.toml
  LOG=live.log expect 0 vk "$NP" train live.toml
  LOG=replay.log expect 0 vk "$NP" train replay.toml
  grep -q "no teacher forward passes" replay.log || { cat replay.log; fail "the replay ran the teacher"; }
  cmp_ckpt live/checkpoint.h5 replay/checkpoint.h5 --exact --groups model
}

case_ranks_train_on_the_same_views() { same_model_at_one_and_np_ranks small_config "$NP" "${ALL[@]}"; }

case_resume_is_bit_exact() {
  resumed_equals_uninterrupted small_config "$NP" "${ALL[@]}"
  small_config mpio.toml "$NP" "${ALL[@]}" 'data.io="mpio"' 'run.out_dir="mpio"'
  LOG=mpio.log expect 0 vk "$NP" train mpio.toml
  [ "$(json_get mpio/result.json data_io)" = mpio ] || fail "the mpio run did not read through MPI-IO"
  [ "$(json_get full/result.json data_io)" = serial ] || fail "the full run did not read serially"
  cmp_ckpt full/checkpoint.h5 mpio/checkpoint.h5 --exact --groups model
}

case_bad_input_one_line() {
  local P=(prepare folder "$SETUP/images" --size 40 --out "$WORK/x.h5")
  LOG=store.log expect_error 2 "png" vk 1 "${P[@]}" --store png
  LOG=q0.log expect_error 2 "quality" vk 1 "${P[@]}" --store jpeg --quality 0
  for log in store.log q0.log; do
    [ "$(grep -c 'vitkd: error' $log)" = 1 ] || { cat $log; fail "$log: not one line"; }
  done
  # Sample 5 of /train: the second half of its bytes overwritten inside the file.
  cp "$SETUP/jpeg.h5" bad.h5
  "$PYTHON" - <<'PY'
import h5py
with h5py.File("bad.h5", "r+") as f:
    off = f["train/jpeg_offsets"][()]
    a, b = int(off[5]), int(off[6])
    f["train/jpeg"][(a + b) // 2:b] = 0x55
PY
  small_config bad.toml "$NP" 'data.path="bad.h5"' 'run.out_dir="bad"'
  LOG=bad.log expect_error 2 "bad.h5: the JPEG bytes of /train sample 5 do not decode" vk "$NP" train bad.toml
  [ "$(grep -c 'vitkd: error' bad.log)" = 1 ] || { cat bad.log; fail "the damaged sample: not one line"; }
  [ ! -e bad/checkpoint.h5 ] || fail "a checkpoint was written after the damaged sample"
}

PYTHON_MODULES=(h5py numpy PIL)
e2e_main "$@"
