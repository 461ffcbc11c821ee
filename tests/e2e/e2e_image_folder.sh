#!/usr/bin/env bash
# vitkd prepare folder at NP ranks on a folder the test makes itself (PIL):
# PNG (RGB, RGBA, grayscale, 16-bit) and JPEG files of several sizes, one
# garbage .png, one truncated .jpg and one non-image file. "setup" makes the
# folder and prepares it at NP ranks and at 1 rank. Then:
#   dataset_layout_labels_pixels_match     the layout, labels, class names, pixels (solid class
#                                          colours; a half-black/half-white image pins the resize +
#                                          centre crop), mean/std, the skipped count and messages,
#                                          and the NP-rank file equals the 1-rank file
#   one_class_folder_is_refused            (each refusal: exit 2 and one line)
#   missing_folder_is_refused
#   missing_size_is_refused
#   test_fraction_out_of_range_is_refused
#   training_runs_on_the_folder_dataset    vitkd train finishes on it
#   validation_split_is_the_rules_carve    --val-fraction: /val is the rule's carve of the file
#                                          written without it (data/validation.hpp: its
#                                          source_indices rows), /train the rest in order, /test and
#                                          the folder's attributes unchanged, mean/std the rest's; a
#                                          fraction out of range is one line
#   cmyk_jpegs_and_misnamed_pngs_decode_as_pil
#                                          CMYK JPEGs (which libjpeg cannot turn into RGB) and a
#                                          PNG named .jpg are kept, each image byte for byte what
#                                          PIL's Image.open(f).convert("RGB") gives
#   e2e_image_folder.sh --list | CASE NP ROOT    (tests/lib/common.sh)
source "$(dirname "$0")/../lib/common.sh"
CASES=(setup dataset_layout_labels_pixels_match:setup one_class_folder_is_refused:setup
       missing_folder_is_refused:setup missing_size_is_refused:setup
       test_fraction_out_of_range_is_refused:setup training_runs_on_the_folder_dataset:setup
       cmyk_jpegs_and_misnamed_pngs_decode_as_pil validation_split_is_the_rules_carve:setup)

SETUP=${3-}/setup
export MPI_TIMEOUT=300

case_setup() {
  "$PYTHON" - "$WORK/images" <<'PY'
import os, sys
import numpy as np
from PIL import Image
root = sys.argv[1]
colours = {"apple": (200, 30, 40), "banana": (230, 210, 60), "cherry": (90, 10, 30)}
sizes = [(20, 30), (40, 24), (17, 17), (64, 48), (33, 21), (24, 60)]   # (w, h)
for name, c in colours.items():
    d = os.path.join(root, name)
    os.makedirs(d)
    for i, (w, h) in enumerate(sizes):
        im = Image.new("RGB", (w, h), c)
        if i == 1:
            im.save(os.path.join(d, f"img{i}.jpg"), quality=95)
        elif i == 2:
            im.convert("RGBA").save(os.path.join(d, f"img{i}.PNG"))   # opaque alpha, upper-case extension
        else:
            im.save(os.path.join(d, f"img{i}.png"))
gray = os.path.join(root, "dgray")      # grayscale, 8- and 16-bit PNG and a grayscale JPEG
os.makedirs(gray)
Image.new("L", (30, 20), 77).save(os.path.join(gray, "g8.png"))
Image.fromarray(np.full((25, 25), 77 * 257, dtype=np.uint16)).save(os.path.join(gray, "g16.png"))
Image.new("L", (18, 26), 77).save(os.path.join(gray, "g.jpeg"), quality=100)
halves = os.path.join(root, "halves")  # 64x32: left half black, right half white
os.makedirs(halves)
a = np.zeros((32, 64, 3), np.uint8)
a[:, 32:] = 255
for i in range(3):
    Image.fromarray(a).save(os.path.join(halves, f"h{i}.png"))
# Broken files: garbage with a .png name, a truncated JPEG; and a text file (ignored).
with open(os.path.join(root, "apple", "broken.png"), "wb") as f:
    f.write(b"this is not an image at all")
big = Image.fromarray(np.random.default_rng(0).integers(0, 255, (64, 64, 3), dtype=np.uint8))
big.save(os.path.join(root, "banana", "full.jpg"), quality=90)
data = open(os.path.join(root, "banana", "full.jpg"), "rb").read()
os.remove(os.path.join(root, "banana", "full.jpg"))
with open(os.path.join(root, "banana", "truncated.jpg"), "wb") as f:
    f.write(data[: len(data) // 2])
with open(os.path.join(root, "cherry", "notes.txt"), "w") as f:
    f.write("not an image\n")
PY
  vk "$NP" prepare folder "$WORK/images" --out "$WORK/folder.h5" --size 16 --test-fraction 0.25 --seed 5 \
    > prepare.out 2> prepare.err || { cat prepare.out prepare.err; fail "prepare folder at $NP ranks"; }
  "$VITKD" prepare folder "$WORK/images" --out "$WORK/folder1.h5" --size 16 --test-fraction 0.25 \
    --seed 5 > /dev/null 2>&1 || fail "prepare folder at 1 rank"
}

case_dataset_layout_labels_pixels_match() {
  cat "$SETUP/prepare.out" "$SETUP/prepare.err"
  grep -q "skipped 2 unreadable or corrupt file(s)" "$SETUP/prepare.out" || fail "no skipped count"
  grep -q "skipped '$SETUP/images/apple/broken.png': not a PNG or JPEG file" "$SETUP/prepare.err" \
    || fail "no message for the garbage .png"
  grep -q "skipped '$SETUP/images/banana/truncated.jpg': corrupt JPEG" "$SETUP/prepare.err" \
    || fail "no message for the truncated .jpg"
  "$PYTHON" - "$SETUP" "$NP" <<'PY'
import sys, h5py, numpy as np
work, np_ = sys.argv[1], int(sys.argv[2])
f, g = h5py.File(f"{work}/folder.h5", "r"), h5py.File(f"{work}/folder1.h5", "r")
s = lambda v: v.decode() if isinstance(v, bytes) else str(v)
assert s(f.attrs["format"]) == "vitkd-dataset" and int(f.attrs["format_version"]) == 1
names = [s(n) for n in f.attrs["class_names"]]
assert names == ["apple", "banana", "cherry", "dgray", "halves"], names
assert int(f.attrs["skipped"]) == 2, f.attrs["skipped"]
for split in ("train", "test"):                       # NP ranks == 1 rank, byte for byte
    for k in ("images", "labels"):
        assert np.array_equal(f[split][k][()], g[split][k][()]), (split, k)
imgs = {sp: f[sp]["images"][()] for sp in ("train", "test")}
labs = {sp: f[sp]["labels"][()] for sp in ("train", "test")}
for sp in imgs:
    assert imgs[sp].dtype == np.uint8 and imgs[sp].shape[1:] == (16, 16, 3), imgs[sp].shape
    assert labs[sp].dtype == np.int32 and labs[sp].shape == (imgs[sp].shape[0],)
allx, ally = np.concatenate([imgs["train"], imgs["test"]]), np.concatenate([labs["train"], labs["test"]])
counts = np.bincount(ally, minlength=5).tolist()
assert counts == [6, 6, 6, 3, 3], counts                 # 7 files in apple/banana, 1 broken each
# Stratified split: round(0.25 n) of each class's listed files go to test (a
# broken file counts in n and is dropped from whichever split it fell in).
tc = np.bincount(labs["test"], minlength=5).tolist()
assert tc[2:] == [2, 1, 1] and all(1 <= t <= 2 for t in tc[:2]), tc
colours = [(200, 30, 40), (230, 210, 60), (90, 10, 30), (77, 77, 77)]
for k, c in enumerate(colours):
    err = np.abs(allx[ally == k].astype(int) - np.array(c)).max()
    assert err <= 3, (names[k], err)                     # solid colours survive (JPEG: +-3)
h = allx[ally == 4].astype(int)
assert (h[:, :, :8] == 0).all() and (h[:, :, 8:] == 255).all(), h[0, 0]
x = imgs["train"].reshape(-1, 3) / 255.0
mean, std = x.mean(0), x.std(0)
assert np.allclose(f.attrs["mean"], mean, atol=1e-9) and np.allclose(f.attrs["std"], std, atol=1e-6), \
    (f.attrs["mean"], mean, f.attrs["std"], std)
print(f"OK: folder dataset {len(labs['train'])} train, {len(labs['test'])} test, classes {names}, "
      f"skipped {int(f.attrs['skipped'])}, {np_} ranks == 1 rank")
PY
}

case_cmyk_jpegs_and_misnamed_pngs_decode_as_pil() {
  "$PYTHON" - "$WORK/photos" <<'PY'
import os, sys
import numpy as np
from PIL import Image
root, rng = sys.argv[1], np.random.default_rng(7)
for cls in ("cmyk", "rgb"):
    os.makedirs(os.path.join(root, cls))
for i in range(4):   # noise, so that every pixel tests the conversion
    Image.fromarray(rng.integers(0, 256, (16, 16, 4), dtype=np.uint8), "CMYK").save(
        os.path.join(root, "cmyk", f"c{i}.jpg"), quality=90)
    Image.fromarray(rng.integers(0, 256, (16, 16, 3), dtype=np.uint8)).save(
        os.path.join(root, "rgb", f"r{i}.jpg"), quality=90)
Image.fromarray(rng.integers(0, 256, (16, 16, 3), dtype=np.uint8)).save(
    os.path.join(root, "rgb", "png_named.jpg"), format="PNG")
PY
  vk "$NP" prepare folder "$WORK/photos" --out "$WORK/photos.h5" --size 16 --test-fraction 0.25 \
    > prepare.out 2> prepare.err || { cat prepare.out prepare.err; fail "prepare folder"; }
  if grep -q "skipped '" prepare.out prepare.err || ! grep -q "skipped 0 unreadable" prepare.out; then
    cat prepare.out prepare.err
    fail "a valid photo was skipped"
  fi
  "$PYTHON" - "$WORK" <<'PY'
import glob, os, sys, h5py, numpy as np
from PIL import Image
work = sys.argv[1]
f = h5py.File(f"{work}/photos.h5", "r")
x = np.concatenate([f[s]["images"][()] for s in ("train", "test")])
y = np.concatenate([f[s]["labels"][()] for s in ("train", "test")])
for k, cls in enumerate(("cmyk", "rgb")):
    want = sorted(np.asarray(Image.open(p).convert("RGB")).tobytes()
                  for p in glob.glob(os.path.join(work, "photos", cls, "*.jpg")))
    got = sorted(im.tobytes() for im in x[y == k])
    assert len(got) == len(want), (cls, len(got), len(want))
    for g, w in zip(got, want):
        d = np.abs(np.frombuffer(g, np.uint8).astype(int) - np.frombuffer(w, np.uint8).astype(int)).max()
        assert d == 0, f"{cls}: an image differs from PIL's by up to {d} grey levels"
print(f"OK: {len(y)} photos (4 CMYK JPEGs, a PNG named .jpg) equal PIL's decoding")
PY
}

# WANT COMMAND ...: exit 2 and exactly one line of output, holding WANT.
expect_user_error() {
  local want=$1
  shift
  expect_error 2 "$want" "$@"
  [ "$(wc -l < last.log)" -eq 1 ] || { cat last.log; fail "more than one line of output"; }
}

case_one_class_folder_is_refused() {
  mkdir -p one/only && cp "$SETUP/images/halves/h0.png" one/only/
  expect_user_error "has 1 class subfolder(s)" "$VITKD" prepare folder "$WORK/one" --out "$WORK/x.h5" --size 8
}

case_missing_folder_is_refused() {
  expect_user_error "cannot read directory '$WORK/none'" "$VITKD" prepare folder "$WORK/none" --out "$WORK/x.h5" --size 8
}

case_missing_size_is_refused() {
  expect_user_error "--size S (output height = width in pixels) is required" \
    "$VITKD" prepare folder "$SETUP/images" --out "$WORK/x.h5"
}

case_test_fraction_out_of_range_is_refused() {
  expect_user_error "--test-fraction must be a number in [0, 1)" \
    "$VITKD" prepare folder "$SETUP/images" --out "$WORK/x.h5" --size 8 --test-fraction 1.5
}

case_training_runs_on_the_folder_dataset() {
  LOG=train.log expect 0 vk "$NP" train "$SRC/inputs/smoke.toml" --set data.path="$SETUP/folder.h5" \
    --set run.out_dir="$WORK/run" --set model.channels=3 --set model.classes=5 --set data.batch_size=4 \
    --set train.epochs=2 --set train.mfu_ceiling=1e11
  tail -2 train.log
  grep -q "^done: " train.log || fail "no 'done:' line"
}

case_validation_split_is_the_rules_carve() {
  vk "$NP" prepare folder "$SETUP/images" --out "$WORK/val.h5" --size 16 --test-fraction 0.25 --seed 5 \
    --val-fraction 0.25 --val-seed 3 > prepare.out 2>&1 || { cat prepare.out; fail "prepare folder --val-fraction"; }
  grep -q "prepare: validation split of" prepare.out || { cat prepare.out; fail "no line about the validation split"; }
  "$PYTHON" - "$SETUP/folder.h5" "$WORK/val.h5" <<'PY'
import sys
import h5py, numpy as np
plain, val = (h5py.File(p, "r") for p in sys.argv[1:])
x, y = plain["train/images"][()], plain["train/labels"][()]
src = val["val/source_indices"][()]
assert len(src) > 0 and (np.diff(src) > 0).all(), src
rest = np.setdiff1d(np.arange(len(y)), src)
assert (val["val/images"][()] == x[src]).all() and (val["val/labels"][()] == y[src]).all()
assert (val["train/images"][()] == x[rest]).all() and (val["train/labels"][()] == y[rest]).all()
assert (val["test/images"][()] == plain["test/images"][()]).all()
for k in range(int(y.max()) + 1):  # round(F * n_k) of each class
    assert (y[src] == k).sum() == int(np.floor(0.25 * (y == k).sum() + 0.5)), k
v = x[rest].reshape(-1, 3) / 255.0
assert np.allclose(val.attrs["mean"], v.mean(0), atol=1e-9), (val.attrs["mean"], v.mean(0))
assert float(val.attrs["val_fraction"]) == 0.25 and int(val.attrs["val_seed"]) == 3
for a in ("source", "skipped", "class_names"):
    assert (np.asarray(val.attrs[a]) == np.asarray(plain.attrs[a])).all(), a
print(f"OK: {len(src)} of {len(y)} training images carved into /val by the rule; /train the other {len(rest)}")
PY
  expect_user_error "--val-fraction" "$VITKD" prepare folder "$SETUP/images" --out "$WORK/x.h5" --size 8 --val-fraction 0.9
}

e2e_main "$@"
