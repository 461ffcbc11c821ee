#!/usr/bin/env bash
# End to end on synthetic data at NP ranks. "setup" prepares the data, trains
# a teacher and distils a student from it (3 epochs each); then:
#   teacher_result_complete_and_accurate    result.json has every key, the step and sample
#                                           counts of 3 epochs, top-1 >= 0.85
#   student_learns_from_teacher             the same for the student (top-1 >= 0.6 with a quarter
#                                           of the parameters), one teacher forward per trained
#                                           sample, and its checkpoint's header and shapes
#   teacher_cache_runs_teacher_once_per_sample
#                                           with the teacher-logit cache the teacher runs once per
#                                           sample (epoch 1), then never; a second run reuses the file
#   e2e_distill.sh --list | CASE NP ROOT    (tests/lib/common.sh)
source "$(dirname "$0")/lib/common.sh"
CASES=(setup teacher_result_complete_and_accurate:setup student_learns_from_teacher:setup
       teacher_cache_runs_teacher_once_per_sample:setup)

SETUP=${3-}/setup
export MPI_TIMEOUT=300
STUDENT=(train "$SRC/inputs/smoke.toml" --set data.path="$SETUP/syn.h5" --set run.mode=distill
  --set teacher.checkpoint="$SETUP/teacher/checkpoint.h5" --set model.dim=16 --set model.depth=1
  --set model.dist_token=true --set train.epochs=3)

case_setup() {
  synthetic syn.h5 1536 512 16 4 --seed 3
  LOG=teacher.log expect 0 vk "$NP" train "$SRC/inputs/smoke.toml" --set data.path="$WORK/syn.h5" \
    --set run.out_dir=teacher --set train.epochs=3
  LOG=student.log expect 0 vk "$NP" "${STUDENT[@]}" --set run.out_dir=student
}

# RESULT_JSON MODE: the keys and counts every run's result.json must have.
check_result() {
  "$PYTHON" - "$1" "$2" "$NP" <<'PY'
import json, sys
path, mode, np_ = sys.argv[1], sys.argv[2], int(sys.argv[3])
r = json.load(open(path))
keys = ["mode", "world_size", "steps", "epochs", "test_top1", "train_seconds", "samples_seen",
        "samples_trained", "images_per_second", "parameters"]
missing = [k for k in keys if k not in r]
assert not missing, f"result.json lacks {missing}"
assert r["mode"] == mode, r["mode"]
assert r["world_size"] == np_, r["world_size"]
assert r["epochs"] == 3
# 1536 samples, global batch 32 * np: ceil(1536 / (32 np)) steps per epoch
spe = -(-1536 // (32 * np_))
assert r["steps"] == 3 * spe, (r["steps"], spe)
assert r["samples_seen"] == 3 * 1536, r["samples_seen"]
PY
}

case_teacher_result_complete_and_accurate() {
  check_result "$SETUP/teacher/result.json" teacher
  "$PYTHON" - "$SETUP/teacher/result.json" <<'PY'
import json, sys
t = json.load(open(sys.argv[1]))
assert t["test_top1"] >= 0.85, f"teacher top-1 {t['test_top1']}"
print(f"OK: teacher {t['test_top1']:.3f} ({t['parameters']} params)")
PY
}

case_student_learns_from_teacher() {
  check_result "$SETUP/student/result.json" distill
  "$PYTHON" - "$SETUP" "$NP" <<'PY'
import json, sys, h5py
setup, np_ = sys.argv[1], int(sys.argv[2])
t = json.load(open(f"{setup}/teacher/result.json"))
s = json.load(open(f"{setup}/student/result.json"))
assert s["test_top1"] >= 0.6, f"student top-1 {s['test_top1']}"
assert s["parameters"] < t["parameters"] / 4
assert s["teacher_forwards"] == s["samples_trained"], (s["teacher_forwards"], s["samples_trained"])
with h5py.File(f"{setup}/student/checkpoint.h5", "r") as f:
    assert f.attrs["format"] in (b"vitkd-checkpoint", "vitkd-checkpoint")
    assert int(f.attrs["step"]) == s["steps"]
    assert f["model/head_dist.weight"].shape == (4, 16)
    assert f["model/blocks.0.attn.qkv.weight"].shape == (48, 16)
print(f"OK: teacher {t['test_top1']:.3f} ({t['parameters']} params), "
      f"student {s['test_top1']:.3f} ({s['parameters']} params) at {np_} ranks")
PY
}

case_teacher_cache_runs_teacher_once_per_sample() {
  LOG=cached.log expect 0 vk "$NP" "${STUDENT[@]}" --set distill.teacher_cache=true --set run.out_dir=cached
  LOG=cached2.log expect 0 vk "$NP" "${STUDENT[@]}" --set distill.teacher_cache=true --set run.out_dir=cached2 \
    --set distill.teacher_cache_file="$WORK/cached/teacher_logits.h5"
  grep -q "teacher cache: loaded 1536 of 1536" cached2.log || { cat cached2.log; fail "the cache file was not reused"; }
  "$PYTHON" - "$SETUP" <<'PY'
import json, sys
s = json.load(open(f"{sys.argv[1]}/student/result.json"))
c = json.load(open("cached/result.json"))
c2 = json.load(open("cached2/result.json"))
assert c["teacher_forwards"] == 1536, c["teacher_forwards"]        # once per sample
assert c["teacher_cache_filled"] == 1536 and c["teacher_cache_hits"] == 2 * 1536, c
assert c2["teacher_forwards"] == 0 and c2["teacher_cache_hits"] == 3 * 1536, c2
assert abs(c["test_top1"] - s["test_top1"]) <= 0.05, (c["test_top1"], s["test_top1"])
print(f"OK: teacher cache: live {s['test_top1']:.3f}, cached {c['test_top1']:.3f}, epochs "
      f"{['%.2f' % e for e in c['epoch_seconds']]} s")
PY
}

e2e_main "$@"
