#!/usr/bin/env bash
# The validation split end to end, at NP ranks on synthetic data (data/validation.hpp).
# "setup" prepares a file with --val-fraction 0.25 and trains on it twice (6 epochs):
# evaluating on val and on test; then:
#   prepare_records_a_disjoint_deterministic_split
#                                           /val holds round(0.25 n_k) of each class's training
#                                           samples, byte for byte those /val/source_indices names
#                                           in a file prepared without the split, none of them left
#                                           in /train; the same seed gives the same file, another
#                                           seed another choice; the attributes record the carve
#   evaluations_read_the_val_split          with data.eval_split = "val" and /val's labels made wrong
#                                           on purpose, every evaluation scores 0 while the test split
#                                           (read once, at the end) scores high; result.json names
#                                           the split; the run trained on /train's n - n_val samples
#   test_predictions_match_test_top1        test_predictions.json holds /test's labels in the file's
#                                           order and predictions whose accuracy is result.json's
#                                           test_top1, for both splits of evaluation
#   resume_keeps_the_evaluation_split      a finished run extended with another data.eval_split is
#                                           refused in one line (its curve would mix two splits)
#   e2e_validation.sh --list | CASE NP ROOT    (tests/lib/common.sh)
source "$(dirname "$0")/../lib/common.sh"
CASES=(setup prepare_records_a_disjoint_deterministic_split:setup evaluations_read_the_val_split:setup
       test_predictions_match_test_top1:setup resume_keeps_the_evaluation_split:setup)

SETUP=${3-}/setup
export MPI_TIMEOUT=120

case_setup() {
  synthetic plain.h5 240 96 8 4 --seed 3
  synthetic val.h5 240 96 8 4 --seed 3 --val-fraction 0.25 --val-seed 7
  synthetic val_again.h5 240 96 8 4 --seed 3 --val-fraction 0.25 --val-seed 7
  synthetic val_other.h5 240 96 8 4 --seed 3 --val-fraction 0.25 --val-seed 8
  # The same file with /val's labels shifted by one class: every val prediction of a model that
  # learned the data is then wrong.
  cp val.h5 val_wrong.h5
  "$PYTHON" - "$WORK/val_wrong.h5" <<'PY'
import h5py, sys
with h5py.File(sys.argv[1], "r+") as f:
    f["val/labels"][...] = (f["val/labels"][()] + 1) % 4
PY
  tiny_config tiny.toml "data.path=\"$WORK/val_wrong.h5\"" train.epochs=6 optim.lr=4e-3 checkpoint.every_steps=0
  expect 0 vk "$NP" train "$WORK/tiny.toml" --set data.eval_split=val --set run.out_dir=on_val
  expect 0 vk "$NP" train "$WORK/tiny.toml" --set run.out_dir=on_test
}

case_prepare_records_a_disjoint_deterministic_split() {
  "$PYTHON" - "$SETUP" <<'PY'
import h5py, numpy as np, sys
s = sys.argv[1]
with h5py.File(f"{s}/plain.h5") as p, h5py.File(f"{s}/val.h5") as v:
    src = v["val/source_indices"][()]
    n, lab = len(p["train/labels"]), p["train/labels"][()]
    for k in range(4):
        want = int(np.floor(0.25 * int((lab == k).sum()) + 0.5))  # llround: halves away from zero
        got = int((v["val/labels"][()] == k).sum())
        assert got == want, (k, got, want)
    assert (v["val/images"][()] == p["train/images"][()][src]).all(), "/val is not the named training samples"
    assert (v["val/labels"][()] == lab[src]).all()
    rest = np.setdiff1d(np.arange(n), src)
    assert len(v["train/labels"]) == len(rest) == n - len(src)
    assert (v["train/images"][()] == p["train/images"][()][rest]).all(), "/train is not the rest, in order"
    assert (v["test/images"][()] == p["test/images"][()]).all(), "the test split changed"
    assert v.attrs["val_fraction"] == 0.25 and v.attrs["val_seed"] == 7 and "stratified" in str(v.attrs["val_rule"])
    # The mean and std are those of the training samples that remain.
    x = v["train/images"][()] / 255.0
    assert abs(float(v.attrs["mean"][0]) - x.mean()) < 1e-9, (v.attrs["mean"], x.mean())
with h5py.File(f"{s}/val.h5") as a, h5py.File(f"{s}/val_again.h5") as b, h5py.File(f"{s}/val_other.h5") as c:
    assert (a["val/source_indices"][()] == b["val/source_indices"][()]).all(), "the same seed chose differently"
    assert (a["val/images"][()] == b["val/images"][()]).all()
    assert len(c["val/labels"]) == len(a["val/labels"])
    assert (a["val/source_indices"][()] != c["val/source_indices"][()]).any(), "another seed chose the same"
print(f"OK: {len(src)} of {n} training samples carved, disjoint and deterministic")
PY
}

case_evaluations_read_the_val_split() {
  "$PYTHON" - "$SETUP" <<'PY'
import h5py, json, sys
s = sys.argv[1]
r = json.load(open(f"{s}/on_val/result.json"))
t = json.load(open(f"{s}/on_test/result.json"))
with h5py.File(f"{s}/val_wrong.h5") as f:
    n_train = len(f["train/labels"])
assert r["eval_split"] == "val" and t["eval_split"] == "test", (r["eval_split"], t["eval_split"])
assert r["evaluations"] and all("val_top1" in e and "test_top1" not in e for e in r["evaluations"]), r["evaluations"]
assert all("test_top1" in e for e in t["evaluations"])
# /val's labels are all wrong: a model that learned the data scores low there, high on test.
assert t["test_top1"] > 0.7, f"the run did not learn the data: test top-1 {t['test_top1']}"
assert r["val_top1"] < 0.2 and all(e["val_top1"] < 0.3 for e in r["evaluations"][1:]), r["evaluations"]
assert r["val_top1"] == r["evaluations"][-1]["val_top1"]
assert abs(r["test_top1"] - t["test_top1"]) < 1e-9, "the same training, another evaluation split: same weights"
assert r["samples_seen"] == 6 * n_train == t["samples_seen"], (r["samples_seen"], n_train)
print(f"OK: val top-1 {r['val_top1']:.3f} (labels wrong on purpose), test top-1 {r['test_top1']:.3f}")
PY
}

case_test_predictions_match_test_top1() {
  "$PYTHON" - "$SETUP" <<'PY'
import h5py, json, sys
s = sys.argv[1]
with h5py.File(f"{s}/val_wrong.h5") as f:
    labels = f["test/labels"][()].tolist()
for run in ("on_val", "on_test"):
    r = json.load(open(f"{s}/{run}/result.json"))
    p = json.load(open(f"{s}/{run}/test_predictions.json"))
    assert p["split"] == "test" and p["labels"] == labels, f"{run}: labels not /test's in order"
    assert len(p["predictions"]) == len(labels) and all(0 <= x < 4 for x in p["predictions"])
    acc = sum(a == b for a, b in zip(p["predictions"], labels)) / len(labels)
    assert abs(acc - r["test_top1"]) < 1e-9 and abs(p["top1"] - acc) < 1e-9, (run, acc, r["test_top1"], p["top1"])
    assert r["seed"] == 5 and "eval_split" in r["config"], "result.json lacks its recipe"
print("OK: the predictions give test_top1 in both runs")
PY
}

case_resume_keeps_the_evaluation_split() {
  cp -r "$SETUP/on_val" on_val
  expect_error 2 'was written with data.eval_split = "val"; resume with the same split' \
    vk "$NP" train "$SETUP/tiny.toml" --set run.out_dir="$WORK/on_val" --set train.epochs=7
  [ "$(grep -c 'data.eval_split = "val"; resume' last.log)" -eq 1 ] || { cat last.log; fail "not one line"; }
}

e2e_main "$@"
