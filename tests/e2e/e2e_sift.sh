#!/usr/bin/env bash
# Sifting end to end at NP ranks ("setup": the data and a one-epoch teacher):
#   beta0_equals_no_sifting                 beta = 0 keeps every sample and gives bit-identical
#                                           parameters to the same run without sifting
#   selection_same_at_one_and_np_ranks      the same seed selects the same samples at 1 and NP ranks
#   nothing_dropped_before_delay            no sample is sifted before step sift.delay (timing log,
#                                           sift trace), and the rule applies from there on
#   ce_runs_teacher_on_trained_samples_only criterion "ce": teacher forwards == samples trained
#   rank_keeping_nothing_does_not_deadlock  a rank whose losses are all zero for many batches
#   scope_teacher_beta0_equals_distillation scope "teacher", beta = 0: bit for bit plain distillation
#   scope_teacher_trains_every_sample       scope "teacher": every sample trains, the teacher runs on
#                                           the kept ones only (teacher_forwards == samples_kept)
#   scope_teacher_selection_same_at_one_and_np_ranks
#   in_forward_beta0_equals_distillation    sift.pass "in_forward", beta = 0: bit for bit plain
#                                           distillation
#   in_forward_trains_kept_samples_a_step_per_batch
#                                           "in_forward": only kept samples train and get the teacher,
#                                           one step per global batch (as without sifting)
#   in_forward_selection_same_at_one_and_np_ranks
#   e2e_sift.sh --list | CASE NP ROOT    (tests/lib/common.sh)
source "$(dirname "$0")/../lib/common.sh"
CASES=(setup beta0_equals_no_sifting:setup selection_same_at_one_and_np_ranks:setup
       nothing_dropped_before_delay:setup ce_runs_teacher_on_trained_samples_only:setup
       rank_keeping_nothing_does_not_deadlock:setup scope_teacher_beta0_equals_distillation:setup
       scope_teacher_trains_every_sample:setup scope_teacher_selection_same_at_one_and_np_ranks:setup
       in_forward_beta0_equals_distillation:setup in_forward_trains_kept_samples_a_step_per_batch:setup
       in_forward_selection_same_at_one_and_np_ranks:setup)

SETUP=${3-}/setup
export MPI_TIMEOUT=120
base=(train "$SRC/inputs/smoke.toml" --set data.path="$SETUP/syn.h5" --set train.epochs=2
      --set train.log_every_steps=1000)
dist=("${base[@]}" --set run.mode=distill --set teacher.checkpoint="$SETUP/teacher/checkpoint.h5"
      --set model.dim=16 --set model.depth=1)
# Rank independence of the selection (fp32 compute; selection from step 0).
# The parameters themselves differ in the last bits between 1 and NP ranks (the
# gradient sums run in another order), and one flipped decision changes every
# later batch; lr = 1e-30 freezes them, so this checks the rule alone: the
# history, the gathering order and u_i keyed on (seed, epoch, sample).
sel=(--set sift.enabled=true --set sift.beta=1 --set sift.delay=0 --set sift.trace=true
     --set precision.compute='"fp32"' --set train.epochs=1 --set optim.lr=1e-30 --set optim.min_lr=0)

case_setup() {
  synthetic syn.h5 768 256 16 4 --seed 5
  vk "$NP" "${base[@]}" --set run.out_dir=teacher --set train.epochs=1 > /dev/null
}

# A B WHAT: the parameters of runs A and B (directories) are bit-identical.
same_params() {
  "$PYTHON" - "$1" "$2" "$3" <<'PY'
import sys, h5py, numpy as np
a_dir, b_dir, what = sys.argv[1:]
with h5py.File(f"{a_dir}/checkpoint.h5") as a, h5py.File(f"{b_dir}/checkpoint.h5") as b:
    names = list(a["model"].keys())
    diff = [n for n in names if not np.array_equal(a["model"][n][()], b["model"][n][()])]
assert not diff, f"{what} differs in {diff}"
print(f"ok {what}: {len(names)} parameter tensors bit-identical")
PY
}

# D1 DN WHAT: the sift traces of a 1-rank and an NP-rank run keep the same samples.
same_selection() {
  "$PYTHON" - "$1" "$2" "$3" "$NP" <<'PY'
import sys
d1, dn, what, np_ = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
def trace(d):
    return [tuple(l.split()[i] for i in (0, 1, 3)) for l in open(f"{d}/sift_trace.txt")]
t1, tn = trace(d1), trace(dn)
assert len(t1) == len(tn) == 768, (len(t1), len(tn))
same = sum(a == b for a, b in zip(t1, tn))
kept = sum(int(k) for _, _, k in t1)
assert 0 < kept < len(t1), kept
assert same == len(t1), f"{what}: selection differs between 1 and {np_} ranks at {len(t1) - same} of {len(t1)} samples"
print(f"ok rank independence ({what}): the same {kept} of {len(t1)} samples kept at 1 and {np_} ranks")
PY
}

case_beta0_equals_no_sifting() {
  vk "$NP" "${base[@]}" --set run.out_dir=nosift > /dev/null
  vk "$NP" "${base[@]}" --set run.out_dir=beta0 --set sift.enabled=true --set sift.beta=0 \
    --set sift.delay=0 > /dev/null
  same_params nosift beta0 "beta=0 against no sifting"
  "$PYTHON" -c "
import json; r0 = json.load(open('beta0/result.json'))
assert r0['kept_fraction'] == 1.0 and r0['samples_trained'] == r0['samples_seen'], r0"
}

case_selection_same_at_one_and_np_ranks() {
  # the same global batch (96 samples) at 1 rank and at NP ranks
  vk 1 "${base[@]}" "${sel[@]}" --set data.batch_size=96 --set run.out_dir=sel1 > /dev/null
  vk "$NP" "${base[@]}" "${sel[@]}" --set data.batch_size=$((96 / NP)) --set run.out_dir=selN > /dev/null
  same_selection sel1 selN "scope sample"
}

case_nothing_dropped_before_delay() {
  # Sifting from step 4 on (sift.delay = 3: optimizer steps 1-3 train whole
  # global batches). Each sifted batch ranks the smallest loss of a fresh
  # history at percentile 0, so the first sifted step must drop something.
  local delay=3
  vk "$NP" "${base[@]}" --set train.epochs=1 --set run.out_dir=delay --set sift.enabled=true \
    --set sift.beta=1 --set sift.delay=$delay --set sift.trace=true > /dev/null
  "$PYTHON" - "$delay" "$NP" <<'PY'
import sys, h5py, numpy as np
delay, np_ = int(sys.argv[1]), int(sys.argv[2])
G = 32 * np_                        # smoke.toml: batch_size 32 per rank
with h5py.File("delay/timing.h5", "r") as f:
    step = f["metrics/step"][()]
    seen, trained = f["metrics/samples_seen"][()], f["metrics/samples_trained"][()]
    kept = f["metrics/kept_fraction"][()]
before = step <= delay
assert before.sum() == delay, step
assert (kept[before] == 1.0).all(), kept[before]
assert (trained[before] == seen[before]).all() and list(seen[before]) == [G * s for s in step[before]], \
    (seen[before], trained[before])
assert kept[step == delay + 1][0] < 1.0, f"step {delay + 1} kept everything: {kept[:delay + 2]}"
assert trained[-1] < seen[-1], (trained[-1], seen[-1])
# The trace holds the samples the rule saw: all but the first `delay` global batches.
lines = [l.split() for l in open("delay/sift_trace.txt")]
assert len(lines) == 768 - delay * G, (len(lines), 768 - delay * G)
assert len({int(l[1]) for l in lines}) == len(lines)
print(f"ok delay: steps 1-{delay} kept all {G * delay} samples; the rule saw the other {len(lines)}")
PY
}

case_ce_runs_teacher_on_trained_samples_only() {
  vk "$NP" "${base[@]}" --set run.out_dir=ce --set run.mode=distill \
    --set teacher.checkpoint="$SETUP/teacher/checkpoint.h5" --set model.dim=16 --set model.depth=1 \
    --set sift.enabled=true --set sift.beta=1 --set sift.delay=2 --set sift.criterion=ce > /dev/null
  "$PYTHON" - <<'PY'
import json
r = json.load(open("ce/result.json"))
assert r["teacher_forwards"] == r["samples_trained"], (r["teacher_forwards"], r["samples_trained"])
assert r["samples_trained"] < r["samples_seen"], r
print(f"ok ce: teacher_forwards {r['teacher_forwards']} == samples_trained, seen {r['samples_seen']}, "
      f"kept fraction {r['kept_fraction']:.3f}")
PY
}

case_rank_keeping_nothing_does_not_deadlock() {
  # one rank keeps nothing: the others must not wait for it forever
  vk "$NP" VITKD_TEST_SIFT_ZERO_LOSS_RANK=$((NP - 1)) "${base[@]}" --set run.out_dir=starve \
    --set sift.enabled=true --set sift.beta=2 --set sift.delay=0 > /dev/null
  "$PYTHON" -c "
import json; r = json.load(open('starve/result.json'))
assert r['samples_seen'] == 2 * 768, r['samples_seen']
print(f\"ok starving rank: finished, seen {r['samples_seen']}, trained {r['samples_trained']}\")"
}

case_scope_teacher_beta0_equals_distillation() {
  vk "$NP" "${dist[@]}" --set run.out_dir=dnosift > /dev/null
  vk "$NP" "${dist[@]}" --set run.out_dir=tbeta0 --set sift.enabled=true --set sift.scope=teacher \
    --set sift.beta=0 --set sift.delay=0 > /dev/null
  same_params dnosift tbeta0 "scope teacher, beta=0, against plain distillation"
  "$PYTHON" -c "
import json; r0 = json.load(open('tbeta0/result.json'))
assert r0['kept_fraction'] == 1.0 and r0['teacher_forwards'] == r0['samples_seen'], r0"
}

case_scope_teacher_trains_every_sample() {
  vk "$NP" "${dist[@]}" --set run.out_dir=tbeta1 --set sift.enabled=true --set sift.scope=teacher \
    --set sift.beta=1 --set sift.delay=2 > /dev/null
  "$PYTHON" - <<'PY'
import json
r = json.load(open("tbeta1/result.json"))
assert r["samples_trained"] == r["samples_seen"] == 2 * 768, r
assert r["teacher_forwards"] == r["samples_kept"] < r["samples_seen"], r
assert abs(r["kept_fraction"] - r["samples_kept"] / r["samples_seen"]) < 1e-9, r  # result.json: 10 digits
print(f"ok scope teacher: every sample trained ({r['samples_trained']}), teacher_forwards "
      f"{r['teacher_forwards']} == samples_kept, kept fraction {r['kept_fraction']:.3f}")
PY
}

case_scope_teacher_selection_same_at_one_and_np_ranks() {
  vk 1 "${dist[@]}" "${sel[@]}" --set sift.scope=teacher --set data.batch_size=96 --set run.out_dir=tsel1 > /dev/null
  vk "$NP" "${dist[@]}" "${sel[@]}" --set sift.scope=teacher --set data.batch_size=$((96 / NP)) \
    --set run.out_dir=tselN > /dev/null
  same_selection tsel1 tselN "scope teacher"
}

case_in_forward_beta0_equals_distillation() {
  vk "$NP" "${dist[@]}" --set run.out_dir=dnosift > /dev/null
  vk "$NP" "${dist[@]}" --set run.out_dir=fbeta0 --set sift.enabled=true --set sift.pass=in_forward \
    --set sift.beta=0 --set sift.delay=0 > /dev/null
  same_params dnosift fbeta0 "sift.pass in_forward, beta=0, against plain distillation"
  "$PYTHON" -c "
import json; r0, r = json.load(open('fbeta0/result.json')), json.load(open('dnosift/result.json'))
assert r0['kept_fraction'] == 1.0 and r0['teacher_forwards'] == r0['samples_seen'] and r0['steps'] == r['steps'], r0
assert r0['sift_pass'] == 'in_forward' and r['sift_pass'] == 'off', (r0['sift_pass'], r['sift_pass'])"
}

case_in_forward_trains_kept_samples_a_step_per_batch() {
  vk "$NP" "${dist[@]}" --set run.out_dir=fbeta1 --set sift.enabled=true --set sift.pass=in_forward \
    --set sift.beta=1 --set sift.delay=2 > /dev/null
  "$PYTHON" - "$NP" <<'PY'
import json, math, sys
r, G = json.load(open("fbeta1/result.json")), 32 * int(sys.argv[1])   # smoke.toml: 32 per rank
assert r["samples_seen"] == 2 * 768, r
assert r["teacher_forwards"] == r["samples_trained"] == r["samples_kept"] < r["samples_seen"], r
assert r["steps"] == 2 * math.ceil(768 / G), (r["steps"], G)   # a step per global batch, none pooled
print(f"ok in_forward: {r['steps']} steps of one global batch each; trained == teacher_forwards == kept "
      f"{r['samples_kept']} of {r['samples_seen']}")
PY
}

case_in_forward_selection_same_at_one_and_np_ranks() {
  vk 1 "${base[@]}" "${sel[@]}" --set sift.pass=in_forward --set data.batch_size=96 --set run.out_dir=fsel1 > /dev/null
  vk "$NP" "${base[@]}" "${sel[@]}" --set sift.pass=in_forward --set data.batch_size=$((96 / NP)) \
    --set run.out_dir=fselN > /dev/null
  same_selection fsel1 fselN "pass in_forward"
  # Only the kept samples carry loss: each step's logged loss (the mean over
  # the samples it trained) is the mean of the kept samples' losses of its
  # global batch in the trace (the parameters are frozen, so the ranking loss
  # and the training loss are of one forward).
  "$PYTHON" - fsel1 fselN <<'PY'
import sys, h5py, numpy as np
for d in sys.argv[1:]:
    t = np.loadtxt(f"{d}/sift_trace.txt")
    with h5py.File(f"{d}/timing.h5", "r") as f:
        step, loss = f["metrics/step"][()], f["metrics/loss"][()]
    want = [t[i:i + 96][t[i:i + 96, 3] == 1, 2].mean() for i in range(0, len(t), 96)]
    assert len(step) == len(want) == 8, (len(step), len(want))
    np.testing.assert_allclose(loss, want, rtol=2e-6, err_msg=f"{d}: logged loss is not the kept samples' mean")
    every = [t[i:i + 96, 2].mean() for i in range(0, len(t), 96)]
    assert not np.allclose(loss, every, rtol=1e-4), f"{d}: the loss is every sample's mean"
print(f"ok in_forward: each step's loss is the mean over its kept samples ({len(want)} steps)")
PY
}

e2e_main "$@"
