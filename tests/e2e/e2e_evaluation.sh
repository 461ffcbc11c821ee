#!/usr/bin/env bash
# Test evaluations during training (train.eval_every_steps) and result.json's
# evaluations / time_to_accuracy, at NP ranks on synthetic data. "setup"
# trains the reference run (2 epochs, no step evaluations); then:
#   step_evaluations_leave_training_unchanged
#                                           the same run evaluating after every step ends with a
#                                           bit-identical checkpoint (weights, moments) and loss
#   time_to_accuracy_matches_evaluations    every threshold is reached iff some evaluation is at
#                                           or above it, and names the first such evaluation; the
#                                           evaluations come every N steps and at each epoch end,
#                                           with times that grow and train <= elapsed
#   evaluations_survive_preemption          preempted after step 13 and resumed: the same
#                                           evaluations (steps, samples, top-1) as one run, and
#                                           times that keep growing across the restart
#   threshold_out_of_range_is_refused       a threshold outside (0, 1]: exit 2, one line naming
#                                           the key and the range
#   e2e_evaluation.sh --list | CASE NP ROOT    (tests/lib/common.sh)
source "$(dirname "$0")/../lib/common.sh"
CASES=(setup step_evaluations_leave_training_unchanged:setup time_to_accuracy_matches_evaluations:setup
       evaluations_survive_preemption:setup threshold_out_of_range_is_refused:setup)

SETUP=${3-}/setup
G=12                             # global batch: 4 x 3 ranks, 6 x 2 ranks
B=$((G / ${2:-1}))
T=(train "$SETUP/tiny.toml" --set data.batch_size=$B)
export MPI_TIMEOUT=120

case_setup() {
  synthetic syn.h5 192 96 8 4 --seed 3
  tiny_config tiny.toml "data.path=\"$WORK/syn.h5\"" train.epochs=2 checkpoint.every_steps=0 \
    'train.accuracy_thresholds=[0.01, 0.3, 0.5, 0.7, 1.0]'
  expect 0 vk "$NP" "${T[@]}" --set run.out_dir=plain
}

# RESULT_JSON EVERY: checks evaluations and time_to_accuracy of a run of 2
# epochs of 16 steps that evaluated every EVERY steps (0: epoch ends only).
check_evaluations() {
  "$PYTHON" - "$1" "$2" <<'PY'
import json, sys
r, every = json.load(open(sys.argv[1])), int(sys.argv[2])
ev, tta = r["evaluations"], r["time_to_accuracy"]
steps = sorted(set([s for s in range(1, 33) if every and s % every == 0] + [16, 32]))
assert [e["step"] for e in ev] == steps, [e["step"] for e in ev]
assert [e["samples_seen"] for e in ev] == [12 * s for s in steps]
assert [e["epoch"] for e in ev] == [(s - 1) // 16 for s in steps]
# the epoch-end evaluations are test_top1_per_epoch's, the last one test_top1
assert [e["test_top1"] for e in ev if e["step"] % 16 == 0] == r["test_top1_per_epoch"]
assert ev[-1]["test_top1"] == r["test_top1"]
for a, b in zip(ev, ev[1:]):
    assert a["train_seconds"] < b["train_seconds"] and a["elapsed_seconds"] < b["elapsed_seconds"], (a, b)
    # the time evaluating only grows
    assert a["elapsed_seconds"] - a["train_seconds"] <= b["elapsed_seconds"] - b["train_seconds"] + 1e-9
for e in ev:
    assert 0 < e["train_seconds"] <= e["elapsed_seconds"] <= r["train_seconds"], e
keys = ("step", "samples_seen", "train_seconds", "elapsed_seconds")
assert [t["threshold"] for t in tta] == [0.01, 0.3, 0.5, 0.7, 1.0], tta
for t in tta:
    first = next((e for e in ev if e["test_top1"] >= t["threshold"]), None)
    assert t["reached"] == (first is not None), (t, ev)
    assert all(t[k] == (first[k] if first else None) for k in keys), (t, first)
top = max(e["test_top1"] for e in ev)
assert tta[0]["reached"] and (top == 1.0 or not tta[-1]["reached"]), tta
print(f"OK: {len(ev)} evaluations, top-1 {ev[0]['test_top1']:.3f} .. {ev[-1]['test_top1']:.3f}, "
      f"reached {[t['threshold'] for t in tta if t['reached']]}")
PY
}

case_step_evaluations_leave_training_unchanged() {
  expect 0 vk "$NP" "${T[@]}" --set train.eval_every_steps=1 --set run.out_dir=every
  grep -q "step 7: test top-1" last.log || fail "no evaluation after step 7"
  cmp_ckpt "$SETUP/plain/checkpoint.h5" every/checkpoint.h5 --exact
  "$PYTHON" - "$SETUP/plain" every <<'PY'
import h5py, json, sys
a, b = (json.load(open(f"{d}/result.json")) for d in sys.argv[1:3])
for k in ("steps", "samples_seen", "final_loss", "test_top1", "test_top1_per_epoch"):
    assert a[k] == b[k], (k, a[k], b[k])
assert len(a["evaluations"]) == 2 and len(b["evaluations"]) == 32, (a["evaluations"], len(b["evaluations"]))
la, lb = (h5py.File(f"{d}/timing.h5", "r")["metrics/loss"][()] for d in sys.argv[1:3])
assert (la == lb).all(), "the per-step losses differ"
PY
  check_evaluations every/result.json 1
  check_evaluations "$SETUP/plain/result.json" 0
}

case_time_to_accuracy_matches_evaluations() {
  expect 0 vk "$NP" "${T[@]}" --set train.eval_every_steps=5 --set run.out_dir=five
  check_evaluations five/result.json 5
}

case_evaluations_survive_preemption() {
  local E=(--set train.eval_every_steps=3)
  expect 0 vk "$NP" "${T[@]}" "${E[@]}" --set run.out_dir=full
  expect 75 vk "$NP" VITKD_TEST_PREEMPT_AT_STEP=13 "${T[@]}" "${E[@]}" --set run.out_dir=cut
  expect 0 vk "$NP" "${T[@]}" "${E[@]}" --set run.out_dir=cut
  grep -q "resume: from cut/checkpoint.h5" last.log || fail "did not resume"
  check_evaluations cut/result.json 3
  "$PYTHON" <<'PY'
import json
a, b = (json.load(open(f"{d}/result.json"))["evaluations"] for d in ("full", "cut"))
strip = lambda ev: [(e["step"], e["epoch"], e["samples_seen"], e["test_top1"]) for e in ev]
assert strip(a) == strip(b), (strip(a), strip(b))
PY
}

case_threshold_out_of_range_is_refused() {
  expect_error 2 "invalid value for 'train.accuracy_thresholds': every threshold must be in (0, 1]" \
    vk "$NP" "${T[@]}" --set 'train.accuracy_thresholds=[0.9, 1.5]' --set run.out_dir=bad
  [ "$(grep -c 'vitkd: error' last.log)" = 1 ] || fail "not one error line"
  [ ! -e bad ] || fail "the refused run wrote bad/"
}

e2e_main "$@"
