#!/usr/bin/env bash
# shellcheck disable=SC2317,SC2012,SC2153  # checks run indirectly; ls on our own file names; run.sh sets STEPS, DATA, ...
# The GPU checks: one function check_<name> per check, each a CTest test
# gpu.<name> (label gpu; tests/gpu/CMakeLists.txt registers them from the
# list below, tests/gpu/run.sh runs one: the skip rules, the time limit and
# its watchdog, the JSON fragment). jobs/gpu/check.sh runs them all with
# `ctest -L gpu` on a GPU machine; `ctest --test-dir BUILD -L gpu` does the
# same on any machine where vitkd is built (docs/gpu.md).
#
#   bash tests/gpu/checks.sh --list    # NAME LIMIT_S [NEEDED ...], in run order
#
# LIMIT_S is the time limit of the whole check on an H200 (all its runs),
# multiplied by VITKD_GPU_LIMIT_SCALE at configure time. NEEDED names checks
# whose results this one reads (a CTest fixture: they run first).
#
# A feature vitkd does not have yet is a "skip" with the reason, found from
# `vitkd --help`, `vitkd keys` or `vitkd bench --help`. In the dry run
# (VITKD_GPU_DRY_RUN=1) the CPU stands in for cuda: every check that can runs
# with `cpu` where it would use `cuda`, with few steps.
#   a_info          nvidia-smi, vitkd --version, the build's features
#   a_bench_gemm    vitkd bench gemm on the GPU
#   b_bench_adamw   vitkd bench adamw --steps 20: device AdamW against the host
#                   kernel, max_rel_diff <= 1e-6
#   c_cuda_vs_cpu   20 fp32 steps on cuda and on cpu, same seed: model weights
#                   and moments within relative L2 1e-4
#   d_nccl_vs_mpi   1 rank, dist.backend nccl against mpi, 20 fp32 steps:
#                   bitwise or relative L2 <= 1e-5 (needs CUDA: a skip in the
#                   dry run)
#   e_two_ranks     2 ranks x batch 32 (MPI backend, one shared GPU) against
#                   1 rank x batch 64: relative L2 <= 1e-5
#   f_resume_*      a checkpoint written on one device resumes on the other
#                   (cuda->cpu and cpu->cuda)
#   g_throughput_*  images/s medians of vitkd and the eager PyTorch baseline
#                   (benchmarks/pytorch_baseline.py) on the same device, runs
#                   alternated (teacher, distill, ViT-S/16 224x224 with MFU)
#   h_phase_timing  the teacher throughput runs' phase times (CUDA events on a
#                   GPU) add up to 0.75-1.05 of the run's time, and the
#                   timing log's own overhead is below 1 %
gpu_checks_list() {
  cat <<'EOF'
a_info 30
a_bench_gemm 30
b_bench_adamw 30
c_cuda_vs_cpu 60
d_nccl_vs_mpi 45
e_two_ranks 60
f_resume_cuda_cpu 75
f_resume_cpu_cuda 75
g_throughput_teacher 90
h_phase_timing 15 g_throughput_teacher
g_throughput_distill 75 g_throughput_teacher
g_throughput_vits16 120
EOF
}
if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  case "${1:-}" in
    --list) gpu_checks_list; exit 0 ;;
    *) echo "usage: bash tests/gpu/checks.sh --list (the checks run through tests/gpu/run.sh)" >&2; exit 2 ;;
  esac
fi

# ---------------------------------------------------------------------------
# Helpers. run.sh sets VITKD, PYTHON, ROOT, OUT, RUNS, DATA, H5CMP, STEPS,
# HALF, DRY, CHECK, MPIEXEC, MPI_BIND ("--bind-to none" for Open MPI) and
# VITKD_KEYS (the names `vitkd keys` lists) before calling a check.
# ---------------------------------------------------------------------------
# emit STATUS REASON [key=value ...] writes the check's fragment (values that
# parse as JSON are kept as JSON: numbers, objects, booleans).
emit() {
  "$PYTHON" - "$OUT/checks/$CHECK.json" "$CHECK" "$@" <<'PY'
import json, sys
path, name, status, reason, *kv = sys.argv[1:]
numbers = {}
for item in kv:
    k, _, v = item.partition("=")
    try:
        numbers[k] = json.loads(v)
    except ValueError:
        numbers[k] = v
with open(path, "w") as f:
    json.dump({"name": name, "status": status, "reason": reason, "numbers": numbers}, f)
PY
}
vk() { "$VITKD" "$@"; }
# Settings that make short runs short: no start-up FLOP/s probe, no
# evaluation, no periodic checkpoints or timing rows beyond the end.
QUICK=(--set train.mfu_ceiling=1e12 --set train.final_eval=false --set train.eval_every_epochs=0
       --set train.timing_every_steps=1000 --set checkpoint.resume=never)
FP32=(--set precision.compute=fp32)

have_key() { grep -qx "$1" <<< "$VITKD_KEYS"; }
# (Not `vitkd ... | grep -q`: under pipefail, grep's early exit can make
# vitkd die of SIGPIPE and the test read as false.)
has_bench_adamw() { grep -q 'bench adamw' <<< "$("$VITKD" bench --help 2>&1)"; }
# --set run.device=X, or nothing for cpu when vitkd has no run.device yet.
devset() {
  if have_key run.device; then echo "--set run.device=$1"; elif [ "$1" = cpu ]; then echo ""; else return 1; fi
}
last_ckpt() { ls "$1"/checkpoint-step*.h5 2>/dev/null | sort | tail -1; }
# train1 DIR DEVICE [extra args...]: 1 rank, STEPS fp32 steps from the seed
train1() {
  local dir=$1 dev=$2; shift 2
  # shellcheck disable=SC2046
  vk train "$ROOT/inputs/fmnist-teacher.toml" $(devset "$dev") "${QUICK[@]}" "${FP32[@]}" \
    --set train.max_steps="$STEPS" --set data.path="$DATA" --set run.out_dir="$dir" "$@"
}
cmp_json() { "$H5CMP" "$@"; }

# verdict JSON TOL WHAT: emits pass when the comparison read both files and
# rel_l2 <= TOL (bitwise passes too), with the numbers in the reason.
verdict() {
  local line
  line=$("$PYTHON" -c '
import json, sys
d = json.loads(sys.argv[1]); tol = float(sys.argv[2])
ok = bool(d.get("ok")) and (d["bitwise"] or d["rel_l2"] <= tol)
how = "bitwise equal" if d["bitwise"] else f"relative L2 {d['"'"'rel_l2'"'"']:.3g}, max |diff| {d['"'"'max_abs'"'"']:.3g}"
if not d.get("ok"):
    how = "the checkpoints could not be compared (missing or different datasets)"
print(("pass" if ok else "fail") + "\t" + how + f" (tolerance: relative L2 {tol:g})")' "$1" "$2" 2>/dev/null) ||
    line=$'fail\tno comparison (h5cmp failed or a checkpoint is missing)'
  emit "${line%%$'\t'*}" "$3: ${line#*$'\t'}" compare="$1"
}

# ---- a: system and build record, GEMM bench -----------------------------------
check_a_info() {
  nvidia-smi 2>&1 | tee "$OUT/nvidia-smi.txt" || true
  local ver gpu
  ver=$("$VITKD" --version 2>&1 | head -1)
  gpu=$(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | head -1)
  echo "vitkd: $ver"
  local feats=()
  have_key run.device && feats+=(run.device)
  has_bench_adamw && feats+=(bench_adamw)
  [ "${VITKD_GPU_HAVE_NCCL:-0}" = 1 ] && feats+=(nccl)
  emit pass "recorded" vitkd="$ver" gpu="${gpu:-none}" features="${feats[*]:-none}"
}

check_a_bench_gemm() {
  local help args=() dev=cuda
  [ "$DRY" = 1 ] && dev=cpu   # the dry run measures the CPU briefly
  help=$("$VITKD" bench gemm --help 2>&1)
  echo "$help"
  if grep -q -- '--device' <<< "$help"; then args=(--device "$dev")
  elif grep -q -- '--set' <<< "$help" && have_key run.device; then args=(--set run.device="$dev")
  else emit skip "vitkd bench gemm has no device option (vitkd bench gemm --help)"; return; fi
  [ "$DRY" = 1 ] && args+=(--millis 100)
  if vk bench gemm "${args[@]}" --out "$OUT/bench-gemm.json"; then
    emit pass "bench gemm on $dev ran" result="$(cat "$OUT/bench-gemm.json" 2>/dev/null || echo null)"
  else
    emit fail "vitkd bench gemm ${args[*]} failed"
  fi
}

# ---- b: device AdamW against the host kernel -----------------------------------
check_b_bench_adamw() {
  if ! has_bench_adamw; then
    emit skip "vitkd has no 'bench adamw' (vitkd bench --help)"; return
  fi
  # The dry run compares the device kernels run on the CPU with the host kernel.
  local line diff args=() dev=cuda help
  [ "$DRY" = 1 ] && dev=cpu
  help=$("$VITKD" bench adamw --help 2>&1)
  grep -q -- '--device' <<< "$help" && args=(--device "$dev")
  if grep -q -- '--out' <<< "$help"; then
    # The JSON it prints spans several lines: read the --out file instead.
    rm -f "$OUT/bench-adamw.json"
    vk bench adamw --steps 20 "${args[@]}" --out "$OUT/bench-adamw.json"
    line=$("$PYTHON" -c 'import json,sys; print(json.dumps(json.load(open(sys.argv[1]))))' "$OUT/bench-adamw.json" 2>/dev/null)
  else
    line=$(vk bench adamw --steps 20 "${args[@]}" | tee -a /dev/stderr | grep max_rel_diff | tail -1)
  fi
  diff=$("$PYTHON" -c 'import json,sys; print(json.loads(sys.argv[1])["max_rel_diff"])' "$line" 2>/dev/null)
  if [ -z "$diff" ]; then emit fail "vitkd bench adamw gave no max_rel_diff (see the check's log)"; return; fi
  if "$PYTHON" -c 'import sys; sys.exit(0 if float(sys.argv[1]) <= float(sys.argv[2]) else 1)' "$diff" "${VITKD_GPU_ADAMW_TOL:-1e-6}"; then
    emit pass "$dev: max_rel_diff $diff <= ${VITKD_GPU_ADAMW_TOL:-1e-6}" max_rel_diff="$diff" result="$line"
  else
    emit fail "$dev: max_rel_diff $diff > ${VITKD_GPU_ADAMW_TOL:-1e-6}" max_rel_diff="$diff" result="$line"
  fi
}

# ---- c: cuda against cpu ------------------------------------------------------
check_c_cuda_vs_cpu() {
  local r=$RUNS/c cj other=cuda
  rm -rf "$r"
  if [ "$DRY" = 1 ]; then
    other=cpu   # the dry run checks the comparison with a second cpu run
  elif ! have_key run.device; then
    emit skip "vitkd has no run.device key yet (vitkd keys)"; return
  fi
  train1 "$r/cpu" cpu || { emit fail "cpu run failed"; return; }
  train1 "$r/$other" "$other" || { emit fail "$other run failed"; return; }
  cj=$(cmp_json "$(last_ckpt "$r/cpu")" "$(last_ckpt "$r/$other")" model optimizer)
  echo "$cj"
  verdict "$cj" 1e-4 "$STEPS fp32 steps, $other against cpu, model+optimizer"
}

# ---- d: NCCL against MPI at 1 rank -----------------------------------------------
check_d_nccl_vs_mpi() {
  [ "$DRY" = 1 ] && { emit skip "dry run on CPU (NCCL needs CUDA)"; return; }
  have_key run.device || { emit skip "vitkd has no run.device key yet"; return; }
  [ "${VITKD_GPU_HAVE_NCCL:-0}" = 1 ] || { emit skip "vitkd was built without NCCL"; return; }
  local r=$RUNS/d cj
  rm -rf "$r"
  train1 "$r/mpi" cuda --set dist.backend=mpi || { emit fail "mpi backend run failed"; return; }
  if ! train1 "$r/nccl" cuda --set dist.backend=nccl; then
    emit fail "nccl backend run failed (see the log: a clear 'not supported' error there means the feature is missing)"; return
  fi
  cj=$(cmp_json "$(last_ckpt "$r/mpi")" "$(last_ckpt "$r/nccl")" model optimizer)
  echo "$cj"
  verdict "$cj" 1e-5 "nccl against mpi, 1 rank, $STEPS fp32 steps, model+optimizer"
}

# ---- e: 2 ranks x 32 against 1 rank x 64 -----------------------------------------
check_e_two_ranks() {
  local dev=cuda r=$RUNS/e cj
  if [ "$DRY" = 1 ]; then dev=cpu
  elif ! have_key run.device; then emit skip "vitkd has no run.device key yet"; return; fi
  [ -n "$MPIEXEC" ] || { emit skip "no MPI launcher (MPIEXEC) known to the tests"; return; }
  rm -rf "$r"
  train1 "$r/one" "$dev" --set dist.backend=mpi --set data.batch_size=64 || { emit fail "1-rank run failed"; return; }
  # shellcheck disable=SC2046,SC2086
  "$MPIEXEC" ${MPI_BIND:-} ${MPIEXEC_NUMPROC_FLAG:--n} 2 ${MPIEXEC_PREFLAGS:-} "$VITKD" ${MPIEXEC_POSTFLAGS:-} \
    train "$ROOT/inputs/fmnist-teacher.toml" $(devset "$dev") "${QUICK[@]}" "${FP32[@]}" \
    --set train.max_steps="$STEPS" --set data.path="$DATA" --set run.out_dir="$r/two" \
    --set dist.backend=mpi --set data.batch_size=32 || { emit fail "2-rank run ($MPIEXEC -n 2) failed"; return; }
  cj=$(cmp_json "$(last_ckpt "$r/one")" "$(last_ckpt "$r/two")" model optimizer)
  echo "$cj"
  verdict "$cj" 1e-5 "$dev, 2 ranks x 32 against 1 rank x 64, $STEPS fp32 steps, model+optimizer"
}

# ---- f: a checkpoint written on one device resumes on the other -------------------
# Run A trains on device X with the schedule of STEPS steps and is stopped at
# step HALF by the test-only preemption (VITKD_TEST_PREEMPT_AT_STEP: it
# finishes the step, writes checkpoint-step<HALF>.h5 and exits with 75), so
# that the learning-rate schedule is the one of the full run (a run that
# simply ends at HALF and is then extended follows another cosine).
#  1. Round trip: a copy of A's checkpoint is resumed on device Y with
#     train.max_steps = HALF: no step is left, so Y writes the weights it
#     loaded straight back into a checkpoint at step HALF. Those must be
#     bitwise equal to A's (X -> file -> Y -> file loses nothing). If Y does
#     not write a new checkpoint the round trip is reported as not measured.
#  2. Resume: another copy is resumed on Y to STEPS steps and compared with
#     an uninterrupted STEPS-step run on Y (report: relative L2 and max |diff|;
#     the first HALF steps ran on X, so only rounding differences are
#     expected; pass needs the resume to succeed and the round trip to hold).
resume_check() {  # X Y
  local x=$1 y=$2 r=$RUNS/f-$1-$2 a rt rs full cj_rt cj_rs rc st reason
  rm -rf "$r"; mkdir -p "$r/rt" "$r/resume"
  VITKD_TEST_PREEMPT_AT_STEP=$HALF train1 "$r/a" "$x" --set checkpoint.every_steps=0
  rc=$?
  a=$r/a/$(printf 'checkpoint-step%08d.h5' "$HALF")
  if [ "$rc" != 75 ] || [ ! -s "$a" ]; then emit fail "run A on $x: exit $rc, no checkpoint at step $HALF"; return; fi
  cp "$a" "$r/rt/"; cp "$a" "$r/resume/"
  local before
  before=$(stat -c %Y.%s "$r/rt/$(basename "$a")")
  train1 "$r/rt" "$y" --set checkpoint.resume=auto --set train.max_steps="$HALF" ||
    { emit fail "round trip: resuming on $y with 0 steps left failed"; return; }
  rt=$r/rt/$(basename "$a")
  if [ "$(stat -c %Y.%s "$rt")" = "$before" ] && [ "$(ls "$r/rt"/checkpoint-step*.h5 | wc -l)" = 1 ] &&
     cmp -s "$rt" "$a"; then
    cj_rt='{"measured": false}'
  else
    cj_rt=$(cmp_json "$a" "$(last_ckpt "$r/rt")" model optimizer)
  fi
  train1 "$r/resume" "$y" --set checkpoint.resume=auto ||
    { emit fail "resuming A's step-$HALF checkpoint on $y to step $STEPS failed" roundtrip="$cj_rt"; return; }
  train1 "$r/full" "$y" || { emit fail "uninterrupted run on $y failed" roundtrip="$cj_rt"; return; }
  rs=$(last_ckpt "$r/resume"); full=$(last_ckpt "$r/full")
  cj_rs=$(cmp_json "$full" "$rs" model)
  echo "round trip: $cj_rt"; echo "resumed vs uninterrupted: $cj_rs"
  "$PYTHON" - "$cj_rt" "$cj_rs" "$x" "$y" "$HALF" "$STEPS" > "$r/verdict.txt" <<'PY'
import json, sys
rt, rs = json.loads(sys.argv[1]), json.loads(sys.argv[2])
x, y, half, steps = sys.argv[3:]
if rs.get("step_b") != int(steps):
    print(f"fail\tthe resumed run ended at step {rs.get('step_b')}, not {steps}")
elif rt.get("measured") is False:
    print(f"fail\tresume {x}->{y} works, but the round trip was not measured (no checkpoint rewritten at step {half})")
elif not rt.get("bitwise"):
    print(f"fail\tthe step-{half} weights changed on the way {x} -> {y} -> file (max |diff| {rt.get('max_abs')})")
else:
    print(f"pass\t{x} step-{half} checkpoint -> {y}: bitwise round trip; resumed to {steps} vs uninterrupted "
          f"{y}: relative L2 {rs['rel_l2']:.3g}, max |diff| {rs['max_abs']:.3g}")
PY
  IFS=$'\t' read -r st reason < "$r/verdict.txt"
  emit "$st" "$reason" roundtrip="$cj_rt" resumed_vs_uninterrupted="$cj_rs"
}
check_f_resume_cuda_cpu() {
  if [ "$DRY" = 1 ]; then resume_check cpu cpu; return; fi
  have_key run.device || { emit skip "vitkd has no run.device key yet"; return; }
  resume_check cuda cpu
}
check_f_resume_cpu_cuda() {
  [ "$DRY" = 1 ] && { emit skip "dry run on CPU (f_resume_cuda_cpu ran cpu -> cpu)"; return; }
  have_key run.device || { emit skip "vitkd has no run.device key yet"; return; }
  resume_check cpu cuda
}

# ---- g: throughput, vitkd against the PyTorch baseline, alternated ------------------
# throughput NAME CONFIG STEPS VITKD-ARGS... -- BASELINE-ARGS...
throughput() {
  local name=$1 config=$2 steps=$3; shift 3
  local vargs=() bargs=() dev=cuda
  while [ $# -gt 0 ] && [ "$1" != -- ]; do vargs+=("$1"); shift; done
  shift
  bargs=("$@")
  if [ "$DRY" = 1 ]; then dev=cpu
  elif ! have_key run.device; then emit skip "vitkd has no run.device key yet"; return; fi
  local have_pt=1 r=$RUNS/g-$name
  "$PYTHON" -c 'import h5py, numpy, torch' 2>/dev/null || have_pt=0
  rm -rf "$r"; mkdir -p "$r"
  local i
  for i in 1 2 3; do
    # shellcheck disable=SC2046
    vk train "$config" $(devset "$dev") --set train.max_steps="$steps" --set train.epochs=1000 \
      --set train.final_eval=false --set train.eval_every_epochs=0 --set checkpoint.every_steps=0 \
      --set checkpoint.resume=never --set train.mfu_ceiling=1e12 --set data.path="${GDATA:-$DATA}" \
      --set run.out_dir="$r/vitkd-$i" "${vargs[@]}" || { emit fail "vitkd run $i failed"; return; }
    if [ "$have_pt" = 1 ]; then
      "$PYTHON" "$ROOT/benchmarks/pytorch_baseline.py" --device "$dev" --data "${GDATA:-$DATA}" \
        --max-steps "$steps" --epochs 1000 --out "$r/pytorch-$i/result.json" "${bargs[@]}" ||
        { emit fail "pytorch baseline run $i failed"; return; }
    fi
  done
  local js
  # MFU: vitkd's model FLOPs per sample (result.json) times the median
  # images/s, over the GPU's bf16 dense peak (VITKD_GPU_PEAK_TFLOPS, default
  # 989: the H200's); on the dry run's CPU only the achieved TFLOP/s.
  js=$("$PYTHON" - "$r" "$dev" "${VITKD_GPU_PEAK_TFLOPS:-989}" <<'PY'
import glob, json, statistics, sys
r, dev, peak = sys.argv[1], sys.argv[2], float(sys.argv[3])
out = {}
for who in ("vitkd", "pytorch"):
    runs = [json.load(open(f)) for f in sorted(glob.glob(f"{r}/{who}-*/result.json"))]
    v = [x["images_per_second"] for x in runs]
    if v:
        out[who] = {"images_per_second": v, "median": statistics.median(v)}
flops = [x.get("flops_per_sample") for x in
         (json.load(open(f)) for f in sorted(glob.glob(f"{r}/vitkd-*/result.json")))]
if "vitkd" in out and flops and isinstance(flops[0], (int, float)) and flops[0] > 0:
    out["flops_per_sample"] = flops[0]
    for who in ("vitkd", "pytorch"):
        if who in out:
            out[who]["tflops"] = flops[0] * out[who]["median"] / 1e12
            if dev == "cuda":
                out[who]["mfu"] = out[who]["tflops"] / peak
    if dev == "cuda":
        out["peak_tflops"] = peak
if "vitkd" in out and "pytorch" in out:
    out["vitkd_over_pytorch"] = out["vitkd"]["median"] / out["pytorch"]["median"]
print(json.dumps(out))
PY
)
  echo "$js"
  for f in "$r"/*/result.json; do
    [ -e "$f" ] && cp "$f" "$OUT/results/$name-$(basename "$(dirname "$f")").json"
  done
  local msg
  msg=$("$PYTHON" -c '
import json, sys
d = json.loads(sys.argv[1])
s = f"vitkd median {d['"'"'vitkd'"'"']['"'"'median'"'"']:.0f} img/s"
v = d["vitkd"]
if "mfu" in v:
    s += f" ({v['"'"'tflops'"'"']:.1f} TFLOP/s, MFU {v['"'"'mfu'"'"']:.3f} of {d['"'"'peak_tflops'"'"']:g})"
elif "tflops" in v:
    s += f" ({v['"'"'tflops'"'"']:.3g} TFLOP/s)"
if "pytorch" in d:
    s += f", pytorch {d['"'"'pytorch'"'"']['"'"'median'"'"']:.0f} img/s (ratio {d['"'"'vitkd_over_pytorch'"'"']:.2f})"
print(s)' "$js")
  [ "$have_pt" = 1 ] || msg="$msg; pytorch baseline skipped ($PYTHON lacks h5py, numpy or torch)"
  emit pass "$msg" throughput="$js" steps="$steps" device="$dev"
}
check_g_throughput_teacher() {
  local s=300; [ "$DRY" = 1 ] && s=5
  throughput teacher "$ROOT/inputs/fmnist-teacher.toml" "$s" --set data.augment=false -- \
    --mode teacher --dim 192 --depth 6 --heads 3 --batch-size 64 --warmup-steps 100 --threads 1
}
# The teacher throughput runs of this round: g_throughput_teacher passed
# (its fragment), so RUNS/g-teacher is not left over from an earlier one.
teacher_passed() {
  "$PYTHON" -c 'import json, sys; sys.exit(json.load(open(sys.argv[1]))["status"] != "pass")' \
    "$OUT/checks/g_throughput_teacher.json" 2> /dev/null
}
check_h_phase_timing() {
  if ! teacher_passed || ! ls "$RUNS"/g-teacher/vitkd-*/result.json > /dev/null 2>&1; then
    emit skip "no teacher throughput runs (g_throughput_teacher did not pass)"; return
  fi
  local rows status
  rows=$("$PYTHON" - "$RUNS"/g-teacher/vitkd-*/result.json <<'PY'
import json, os, sys
rows = []
for f in sys.argv[1:]:
    r = json.load(open(f))
    phases = r["phase_seconds_rank0"]
    # train_seconds ends before the final checkpoint is written, and these
    # runs write no other (checkpoint.every_steps = 0, no evaluation): the
    # checkpoint phase is outside the run time the bound divides by.
    if isinstance(phases, dict):
        covered = sum(v for k, v in phases.items() if k not in ("checkpoint", "eval"))
    else:
        covered = sum(phases[:8])  # util/timing.hpp's order: checkpoint and eval are 8 and 9
    covered /= r["train_seconds"]
    rows.append({"run": os.path.basename(os.path.dirname(f)), "phases_over_run": round(covered, 4),
                 "log_overhead": r["timing_log_overhead_fraction"]})
print(json.dumps(rows))
PY
) || { emit fail "could not read the runs' result.json"; return; }
  echo "$rows"
  # The timing log's fixed costs (opening, the final flush) are a larger
  # share of the dry run's 5 CPU steps than of a GPU run's 300: 5 % there.
  local bound=0.01
  [ "$DRY" = 1 ] && bound=0.05
  status=$("$PYTHON" -c 'import json, sys
ok = all(0.75 <= r["phases_over_run"] <= 1.05 and r["log_overhead"] < float(sys.argv[2]) for r in json.loads(sys.argv[1]))
print("pass" if ok else "fail")' "$rows" "$bound")
  emit "$status" "phase times over run time within 0.75-1.05, timing-log overhead below $("$PYTHON" -c 'import sys; print(f"{100 * float(sys.argv[1]):g}")' "$bound") %" runs="$rows"
}
check_g_throughput_distill() {
  local s=300; [ "$DRY" = 1 ] && s=5
  local teacher
  teacher_passed && teacher=$(last_ckpt "$RUNS/g-teacher/vitkd-1")
  [ -n "$teacher" ] || { emit skip "no teacher checkpoint (g_throughput_teacher did not pass)"; return; }
  throughput distill "$ROOT/inputs/fmnist-distill.toml" "$s" --set data.augment=false --set teacher.checkpoint="$teacher" -- \
    --mode distill --teacher "$teacher" --dim 96 --depth 4 --heads 3 --batch-size 64 \
    --warmup-steps 100 --threads 1
}
check_g_throughput_vits16() {
  local s=50 n=4096 b=256; [ "$DRY" = 1 ] && { s=3; n=64; b=8; }
  if [ "$DRY" != 1 ] && ! have_key run.device; then
    emit skip "vitkd has no run.device key yet"; return   # before writing 600 MB of images
  fi
  GDATA=$RUNS/synthetic224-$n.h5   # kept between runs
  if [ ! -s "$GDATA" ]; then
    vk prepare synthetic --out "$GDATA" --train "$n" --test 256 --size 224 --channels 3 --classes 100 ||
      { emit fail "vitkd prepare synthetic failed"; return; }
  fi
  local m=(--set data.augment=false --set model.image_size=224 --set model.channels=3 --set model.patch=16 --set model.dim=384
           --set model.depth=12 --set model.heads=6 --set model.classes=100 --set data.batch_size="$b"
           --set dist.bucket_mb=25 --set optim.warmup_steps=10)
  throughput vits16 "$ROOT/inputs/fmnist-teacher.toml" "$s" "${m[@]}" -- \
    --mode teacher --image-size 224 --channels 3 --patch 16 --dim 384 --depth 12 --heads 6 \
    --classes 100 --batch-size "$b" --warmup-steps 10 --threads 1
}
