#!/usr/bin/env bash
# The per-operator profile of training steps (train.profile_steps), at NP
# ranks on a tiny model:
#   asked_steps_are_profiled_per_operator   a run of 8 steps profiling 2 from step 3 writes one
#                                           Chrome trace per rank and says so once; each holds
#                                           exactly 2 vitkd::step events, every operator event
#                                           inside one of them, the same operators the same number
#                                           of times in each (the model and the optimizer), among
#                                           them the matrix products and their backward;
#                                           analysis/profile_ops.py (Debian's python3) finds the 2
#                                           steps, twice each step's calls, and self times that sum
#                                           to at most the profiled time; each step's phases are
#                                           scopes (vitkd::student_forward, vitkd::backward), and
#                                           profile_ops.py --within puts every backward node in
#                                           the backward's; 3 steps asked for from
#                                           the second-to-last step of an epoch: the profile ends
#                                           with the epoch, 2 steps, and says so
# (A negative train.profile_steps is refused in one line: tests/unit/config/test_config.cpp.)
#   e2e_profile.sh --list | CASE NP ROOT    (tests/lib/common.sh)
source "$(dirname "$0")/../lib/common.sh"
CASES=(asked_steps_are_profiled_per_operator)
PYTHON_MODULES=()
export MPI_TIMEOUT=120

case_asked_steps_are_profiled_per_operator() {
  synthetic syn.h5 64 16 8 4 --seed 3  # 8 steps of 4 x 2 ranks (at least 4 at any NP)
  tiny_config p.toml train.profile_steps=2 train.profile_from_step=3 train.final_eval=false \
    train.eval_every_epochs=0 'run.out_dir="p"'
  LOG=p.log expect 0 vk "$NP" train p.toml
  grep -q "^profile: 2 of 2 step(s) from step 3 in p/profile-rank0.json" p.log ||
    { cat p.log; fail "no profile line"; }
  [ "$(grep -c '^profile:' p.log)" = 1 ] || fail "the profile line is not printed once"
  local r
  for ((r = 0; r < NP; r++)); do
    [ -s p/profile-rank$r.json ] || fail "p/profile-rank$r.json is missing"
    python3 "$SRC/analysis/profile_ops.py" p/profile-rank$r.json --top 12 --json ops$r.json > table$r.txt ||
      fail "analysis/profile_ops.py failed on p/profile-rank$r.json"
  done
  [ ! -e p/profile-rank$NP.json ] && ! ls p/*.tmp 2> /dev/null || fail "stray files in p/"
  cat table0.txt
  "$PYTHON" - "$NP" "$SRC/analysis/profile_ops.py" <<'PY'
import collections, json, subprocess, sys
MM = ("aten::addmm", "aten::mm", "aten::linear", "aten::matmul")
for r in range(int(sys.argv[1])):
    trace = [e for e in json.load(open(f"p/profile-rank{r}.json")) if e.get("ph") == "X"]
    steps = sorted((e["tid"], e["ts"], e["ts"] + e["dur"]) for e in trace if e["name"] == "vitkd::step")
    assert len(steps) == 2, f"rank {r}: {len(steps)} vitkd::step events, asked for 2"
    per_step = [collections.Counter() for _ in steps]
    for e in trace:
        if e["name"] == "vitkd::step":
            continue
        inside = [i for i, (tid, a, b) in enumerate(steps) if tid == e["tid"] and a <= e["ts"] and e["ts"] + e["dur"] <= b]
        assert inside, f"rank {r}: {e} is outside the profiled steps"
        per_step[inside[0]][e["name"]] += 1
    assert per_step[0] == per_step[1], f"rank {r}: the steps differ: {per_step[0] - per_step[1]}, {per_step[1] - per_step[0]}"
    ops = {o["name"]: o for o in json.load(open(f"ops{r}.json"))["operators"]}
    mm = [m for m in MM if m in ops]
    backward = [m for m in ops if m.endswith("Backward0") and ("Addmm" in m or "Mm" in m or "Linear" in m)]
    assert mm and backward, sorted(ops)
    for m in mm + backward:
        assert ops[m]["calls"] == 2 * per_step[0][m] > 0, (m, ops[m]["calls"], per_step[0][m])
    t = json.load(open(f"ops{r}.json"))
    assert t["steps"] == 2 and t["steps_from"] == "step events", (t["steps"], t["steps_from"])
    # One thread (the autograd engine runs a CPU backward on the calling
    # thread); its events' self times sum to at most the profiled time.
    assert t["threads"] == 1 and 0 < t["self_ms_total"] <= t["wall_ms"] * (1 + 1e-9), (t["threads"], t["self_ms_total"], t["wall_ms"])
    print(f"ok: rank {r}: 2 steps of {sum(per_step[0].values())} operator calls each; "
          + ", ".join(f"{m} x{per_step[0][m]}" for m in mm + backward) + " per step")
    # Each step's phases are scopes of the trace: --within splits the operators by phase, every
    # backward node inside vitkd::backward and none inside vitkd::student_forward.
    phase = {}
    for name in ("vitkd::student_forward", "vitkd::backward"):
        assert sum(e["name"] == name for e in trace) >= 2, f"rank {r}: fewer than 2 {name} scopes"
        out = subprocess.run([sys.executable, sys.argv[2], f"p/profile-rank{r}.json", "--within", name,
                              "--json", f"w{r}.json"], capture_output=True, text=True)
        assert out.returncode == 0, out.stderr
        phase[name] = {o["name"]: o for o in json.load(open(f"w{r}.json"))["operators"]}
    fwd, bwd = phase["vitkd::student_forward"], phase["vitkd::backward"]
    assert not [m for m in fwd if m.endswith("Backward0")], sorted(fwd)
    for m in backward:
        assert bwd.get(m, {}).get("calls") == ops[m]["calls"], (m, bwd.get(m), ops[m]["calls"])
    print(f"ok: rank {r}: {len(fwd)} operators within the forward phase, {len(bwd)} within backward")
PY
  # 2 epochs of 4 steps: 64 samples in global batches of 16
  LOG=e.log expect 0 vk "$NP" train p.toml --set data.batch_size=$((16 / NP)) --set train.epochs=2 \
    --set train.profile_steps=3 --set run.out_dir=e
  grep -q "^profile: 2 of 3 step(s) from step 3 in e/profile-rank0.json" e.log || { cat e.log; fail "no profile line"; }
  [ "$(grep -c '^profile:' e.log)" = 1 ] || fail "the profile line is not printed once"
  "$PYTHON" -c 'import json, sys; t = json.load(open("e/profile-rank0.json"))
n = sum(e.get("ph") == "X" and e["name"] == "vitkd::step" for e in t)
sys.exit(f"{n} vitkd::step events at the end of an epoch, 2 expected" if n != 2 else 0)'
}

e2e_main "$@"
