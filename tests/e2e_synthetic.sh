#!/usr/bin/env bash
# End to end on synthetic data at NP ranks: prepare, train a teacher, distill a
# student from it, and check what the runs wrote.
#   e2e_synthetic.sh NP WORKDIR     (env: VITKD, MPIEXEC, MPIEXEC_NUMPROC_FLAG, SRC, PYTHON)
set -euo pipefail
np=$1
work=$2
rm -rf "$work" && mkdir -p "$work"
run() { timeout 300 $MPIEXEC $MPIEXEC_NUMPROC_FLAG "$np" $MPIEXEC_PREFLAGS "$VITKD" "$@"; }

"$VITKD" prepare synthetic --out "$work/syn.h5" --train 1536 --test 512 --size 16 --classes 4 --seed 3

run train "$SRC/inputs/smoke.toml" --set data.path="$work/syn.h5" --set run.out_dir="$work/teacher" \
  --set train.epochs=3 | tee "$work/teacher.log"

run train "$SRC/inputs/smoke.toml" --set data.path="$work/syn.h5" --set run.out_dir="$work/student" \
  --set run.mode=distill --set teacher.checkpoint="$work/teacher/checkpoint.h5" \
  --set model.dim=16 --set model.depth=1 --set model.dist_token=true --set train.epochs=3 \
  | tee "$work/student.log"

# The same distillation with the teacher-logit cache: the teacher runs once
# per sample (epoch 1), then never; a second run reuses the cache file.
STUDENT=(train "$SRC/inputs/smoke.toml" --set data.path="$work/syn.h5" --set run.mode=distill
  --set teacher.checkpoint="$work/teacher/checkpoint.h5" --set model.dim=16 --set model.depth=1
  --set model.dist_token=true --set train.epochs=3 --set distill.teacher_cache=true)
run "${STUDENT[@]}" --set run.out_dir="$work/cached" | tee "$work/cached.log"
run "${STUDENT[@]}" --set run.out_dir="$work/cached2" \
  --set distill.teacher_cache_file="$work/cached/teacher_logits.h5" | tee "$work/cached2.log"
grep -q "teacher cache: loaded 1536 of 1536" "$work/cached2.log"

"$PYTHON" - "$work" "$np" <<'PY'
import json, sys, h5py
work, np_ = sys.argv[1], int(sys.argv[2])
t = json.load(open(f"{work}/teacher/result.json"))
s = json.load(open(f"{work}/student/result.json"))
keys = ["mode", "world_size", "steps", "epochs", "test_top1", "train_seconds", "samples_seen",
        "samples_trained", "images_per_second", "parameters"]
for r in (t, s):
    missing = [k for k in keys if k not in r]
    assert not missing, f"result.json lacks {missing}"
    assert r["world_size"] == np_, r["world_size"]
    assert r["epochs"] == 3
    # 1536 samples, global batch 32 * np: ceil(1536 / (32 np)) steps per epoch
    spe = -(-1536 // (32 * np_))
    assert r["steps"] == 3 * spe, (r["steps"], spe)
    assert r["samples_seen"] == 3 * 1536, r["samples_seen"]
assert t["mode"] == "teacher" and s["mode"] == "distill"
assert t["test_top1"] >= 0.85, f"teacher top-1 {t['test_top1']}"
assert s["test_top1"] >= 0.6, f"student top-1 {s['test_top1']}"
assert s["parameters"] < t["parameters"] / 4
assert s["teacher_forwards"] == s["samples_trained"], (s["teacher_forwards"], s["samples_trained"])
with h5py.File(f"{work}/student/checkpoint.h5", "r") as f:
    assert f.attrs["format"] in (b"vitkd-checkpoint", "vitkd-checkpoint")
    assert int(f.attrs["step"]) == s["steps"]
    assert f["model/head_dist.weight"].shape == (4, 16)
    assert f["model/blocks.0.attn.qkv.weight"].shape == (48, 16)
c = json.load(open(f"{work}/cached/result.json"))
c2 = json.load(open(f"{work}/cached2/result.json"))
assert c["teacher_forwards"] == 1536, c["teacher_forwards"]        # once per sample
assert c["teacher_cache_filled"] == 1536 and c["teacher_cache_hits"] == 2 * 1536, c
assert c2["teacher_forwards"] == 0 and c2["teacher_cache_hits"] == 3 * 1536, c2
assert abs(c["test_top1"] - s["test_top1"]) <= 0.05, (c["test_top1"], s["test_top1"])
print(f"OK: teacher cache: live {s['test_top1']:.3f}, cached {c['test_top1']:.3f}, epochs "
      f"{['%.2f' % e for e in c['epoch_seconds']]} s")
print(f"OK: teacher {t['test_top1']:.3f} ({t['parameters']} params), "
      f"student {s['test_top1']:.3f} ({s['parameters']} params) at {np_} ranks")
PY
