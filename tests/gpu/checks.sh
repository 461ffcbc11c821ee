#!/usr/bin/env bash
# shellcheck disable=SC2317,SC2012,SC2153  # checks run indirectly; ls on our own file names; run.sh sets STEPS, DATA, ...
# The GPU checks: one function check_<name> per check, each a CTest test
# gpu.<name> (label gpu; tests/gpu/CMakeLists.txt registers them from the
# list below, tests/gpu/run.sh runs one: the skip rules, the time limit and
# its watchdog, the JSON fragment). jobs/gpu/check.sh runs them in this order
# on a GPU machine (tests/gpu/run.sh directly, no CTest needed);
# `ctest --test-dir BUILD -L gpu` does the same on any machine where vitkd is
# built (docs/gpu.md). The throughput checks are in checks_perf.sh.
#
#   bash tests/gpu/checks.sh --list    # NAME LIMIT_S [NEEDED ...], in run order
#
# LIMIT_S is the time limit of the whole check on an H100 or H200 (all its
# runs), multiplied by VITKD_GPU_LIMIT_SCALE at configure time. The device
# run is two commands (gpu_checks_part below): 210 s of limits in the first,
# 225 s in the second, each with its set-up and results within 270 s
# (docs/gpu.md, "The device run's budget"). NEEDED names checks whose results
# this one reads (a CTest fixture: they run first). The order is what users
# want to know first; a budget cut drops only the last ones.
#
# A feature vitkd lacks is a "skip" with the reason (a "fail" where
# VITKD_EXPECT_GPU=1). In the dry run (VITKD_GPU_DRY_RUN=1) the CPU stands in
# for cuda: every check that can runs with `cpu` where it would use `cuda`,
# with few steps and small shapes, and no floor applies.
#   a_launch        no GPU needed: `mpirun -n 2 vitkd train`, one CPU step,
#                   from the libraries the run was set up with (the rehearsal)
#   a_info          nvidia-smi and vitkd's build (a failing nvidia-smi fails)
#   a_bench_gemm    vitkd bench gemm on the GPU: the large square bf16 product
#                   >= VITKD_GPU_GEMM_FLOOR_TFLOPS (400: half of the ~790
#                   PyTorch reaches on an H200)
#   c_cuda_vs_cpu   20 fp32 steps on cuda and on cpu, same seed: weights and
#                   moments within relative L2 1e-4
#   c_cuda_vs_cpu_bf16  the same in bf16 autocast, 3 steps: within
#                   VITKD_GPU_BF16_TOL (2e-2: a few bf16 roundings, 2^-8 each)
#   b_bench_adamw   device AdamW against the host kernel, max_rel_diff <= 1e-6
#   f_checkpoint_roundtrip  a cuda checkpoint loaded on cpu and written back,
#                   and a cpu one loaded on cuda: both bitwise equal
#   g_distill_vits16  ViT-B/16 -> ViT-S/16 distillation at 224x224 in vitkd
#                   and in timm (benchmarks/timm_step.py, eager; on batches
#                   already on the GPU, and from the same file through a
#                   DataLoader), images/s, MFU
#   g_vits16        ViT-S/16 alone, the same two
#   g_fmnist        the Fashion-MNIST teacher recipe: vitkd against the eager
#                   PyTorch baseline (benchmarks/pytorch_baseline.py)
#   i_loader        vitkd bench loader at 224 on every core (mpirun -n cores),
#                   next to g_distill_vits16's GPU rate: does the GPU wait?
#                   (a fail without that rate on a GPU: nothing to compare)
#   d_nccl          the one NCCL run at one rank (dist.backend = "nccl" by
#                   name; "auto" reduces nothing at one rank): its weights
#                   equal c_cuda_vs_cpu's cuda run, which used no communicator
#   e_two_ranks     2 ranks x 32 sharing the GPU (MPI backend) against 1 rank
#                   x 64: relative L2 <= 1e-5
#   h_phase_timing  g_vits16's phase times add up to 0.75-1.05 of the run's
#                   time; the timing log's overhead below 1 % of the run
#   g_distill_compile  timm with torch.compile, distillation (compiling takes
#                   most of its limit)
gpu_checks_list() {
  cat <<'EOF'
a_launch 20
a_info 10
c_cuda_vs_cpu 30
g_distill_vits16 110
i_loader 20 g_distill_vits16
d_nccl 20 c_cuda_vs_cpu
a_bench_gemm 20
c_cuda_vs_cpu_bf16 20
b_bench_adamw 10
f_checkpoint_roundtrip 30
g_vits16 30
g_fmnist 30
e_two_ranks 25
h_phase_timing 5 g_vits16
g_distill_compile 55
EOF
}
# The device run's two commands (jobs/gpu/check.sh --part=1, --part=2): the
# first holds what users want first and what the first needs; the second
# everything else. Each part's limits, with its set-up and the results'
# writing, add up to at most 270 s (docs/gpu.md).
GPU_PART1="a_launch a_info c_cuda_vs_cpu g_distill_vits16 i_loader d_nccl"
gpu_checks_part() {  # 1|2: the names of that part, in run order
  local name _rest
  while read -r name _rest; do
    if grep -qw "$name" <<< "$GPU_PART1"; then [ "$1" = 1 ] && echo "$name"; else [ "$1" = 2 ] && echo "$name"; fi
  done < <(gpu_checks_list)
}
if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  case "${1:-}" in
    --list) gpu_checks_list; exit 0 ;;
    --part) case "${2:-}" in 1|2) gpu_checks_part "$2"; exit 0 ;; esac ;;
  esac
  echo "usage: bash tests/gpu/checks.sh --list | --part 1|2 (the checks run through tests/gpu/run.sh)" >&2; exit 2
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
# --set run.device=X (run.sh has checked that vitkd has the key)
devset() { echo "--set run.device=$1"; }
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

# compare_lt VALUE BOUND: true when VALUE <= BOUND (floats)
le() { "$PYTHON" -c 'import sys; sys.exit(0 if float(sys.argv[1]) <= float(sys.argv[2]) else 1)' "$1" "$2"; }

# ---- a: start-up, MPI launch, one CPU step; system and build record, GEMM ---------
check_a_launch() {
  local r=$RUNS/launch
  [ -n "$MPIEXEC" ] || { emit fail "no MPI launcher (MPIEXEC) known to the checks"; return; }
  rm -rf "$r"
  "$VITKD" --version || { emit fail "vitkd --version failed (start-up, libraries)"; return; }
  # shellcheck disable=SC2086
  "$MPIEXEC" ${MPI_BIND:-} ${MPIEXEC_NUMPROC_FLAG:--n} 2 ${MPIEXEC_PREFLAGS:-} "$VITKD" ${MPIEXEC_POSTFLAGS:-} \
    train "$ROOT/inputs/fmnist-teacher.toml" --set run.device=cpu "${QUICK[@]}" "${FP32[@]}" \
    --set train.max_steps=1 --set data.batch_size=8 --set data.path="$DATA" --set run.out_dir="$r" ||
    { emit fail "$MPIEXEC -n 2 vitkd train (1 CPU step) failed: launcher, MPI or libraries (see the log)"; return; }
  [ -s "$r/result.json" ] || { emit fail "the 2-rank CPU run wrote no result.json"; return; }
  local libs
  libs=$(ldd "$VITKD" 2>/dev/null | awk '/lib(mpi|hdf5_openmpi|torch_cpu|trilinos_kokkoscore)\./ {print $3}' | tr '\n' ' ')
  emit pass "$MPIEXEC -n 2: one CPU training step (2 ranks x 8)" mpirun="$("$MPIEXEC" --version 2>&1 | head -1)" libraries="$libs"
}

check_a_info() {
  local ver gpu
  ver=$("$VITKD" --version 2>&1 | head -1)
  echo "vitkd: $ver"
  if ! nvidia-smi > "$OUT/nvidia-smi.txt" 2>&1; then
    cat "$OUT/nvidia-smi.txt"
    [ "$DRY" = 1 ] && { emit pass "dry run: no nvidia-smi here" vitkd="$ver"; return; }
    emit fail "nvidia-smi failed: $(tail -1 "$OUT/nvidia-smi.txt")" vitkd="$ver"; return
  fi
  cat "$OUT/nvidia-smi.txt"
  gpu=$(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | head -1)
  emit pass "$gpu" vitkd="$ver" gpu="$gpu" nccl="${VITKD_GPU_HAVE_NCCL:-0}"
}

check_a_bench_gemm() {
  local dev=cuda floor=${VITKD_GPU_GEMM_FLOOR_TFLOPS:-400} millis=500 tf line
  if [ "$DRY" = 1 ]; then
    # The dry run: the start-up probe only (a CPU without native bf16
    # emulates it, and the 8192^3 product alone would take minutes).
    line=$(vk bench gemm --device cpu --auto-only 2>&1) || { emit fail "vitkd bench gemm --auto-only failed: $(tail -1 <<< "$line")"; return; }
    echo "$line"
    emit pass "dry run: $(tail -1 <<< "$line")"
    return
  fi
  rm -f "$OUT/bench-gemm.json"
  vk bench gemm --device "$dev" --millis "$millis" --out "$OUT/bench-gemm.json" ||
    { emit fail "vitkd bench gemm --device $dev failed"; return; }
  tf=$("$PYTHON" -c 'import json, sys
d = json.load(open(sys.argv[1]))
print(d.get("gemm_bf16_flops_per_device", d.get("gemm_bf16_flops_per_core", 0)) / 1e12)' "$OUT/bench-gemm.json") ||
    { emit fail "bench gemm wrote no bf16 rate"; return; }
  local res; res=$(cat "$OUT/bench-gemm.json")
  if le "$floor" "$tf"; then emit pass "bf16 8192^3: $tf TFLOP/s >= $floor" bf16_tflops="$tf" floor_tflops="$floor" result="$res"
  else emit fail "bf16 8192^3: $tf TFLOP/s < the floor of $floor" bf16_tflops="$tf" floor_tflops="$floor" result="$res"; fi
}

# ---- b: device AdamW against the host kernel -----------------------------------
check_b_bench_adamw() {
  local dev=cuda diff line tol=${VITKD_GPU_ADAMW_TOL:-1e-6}
  [ "$DRY" = 1 ] && dev=cpu
  rm -f "$OUT/bench-adamw.json"
  vk bench adamw --steps 20 --device "$dev" --out "$OUT/bench-adamw.json"   # exit 1 above its own 1e-6
  line=$("$PYTHON" -c 'import json,sys; print(json.dumps(json.load(open(sys.argv[1]))))' "$OUT/bench-adamw.json" 2>/dev/null)
  diff=$("$PYTHON" -c 'import json,sys; print(json.loads(sys.argv[1])["max_rel_diff"])' "$line" 2>/dev/null)
  [ -n "$diff" ] || { emit fail "vitkd bench adamw gave no max_rel_diff (see the check's log)"; return; }
  if le "$diff" "$tol"; then emit pass "$dev: max_rel_diff $diff <= $tol" max_rel_diff="$diff" result="$line"
  else emit fail "$dev: max_rel_diff $diff > $tol" max_rel_diff="$diff" result="$line"; fi
}

# ---- c: cuda against cpu, fp32 and bf16 autocast ----------------------------------
cuda_vs_cpu() {  # PRECISION STEPS TOL
  local prec=$1 steps=$2 tol=$3 r=$RUNS/c-$1 cj other=cuda
  [ "$DRY" = 1 ] && other=cpu   # the dry run checks the comparison with a second cpu run
  rm -rf "$r"
  train1 "$r/cpu" cpu --set precision.compute="$prec" --set train.max_steps="$steps" || { emit fail "cpu run ($prec) failed"; return; }
  train1 "$r/$other" "$other" --set precision.compute="$prec" --set train.max_steps="$steps" ||
    { emit fail "$other run ($prec) failed"; return; }
  cj=$(cmp_json "$(last_ckpt "$r/cpu")" "$(last_ckpt "$r/$other")" model optimizer)
  echo "$cj"
  verdict "$cj" "$tol" "$steps $prec steps, $other against cpu, model+optimizer"
}
check_c_cuda_vs_cpu() { cuda_vs_cpu fp32 "$STEPS" 1e-4; }
# (The dry run: one step; a CPU without native bf16 emulates it, slowly.)
check_c_cuda_vs_cpu_bf16() { cuda_vs_cpu bf16 "$([ "$DRY" = 1 ] && echo 1 || echo 3)" "${VITKD_GPU_BF16_TOL:-2e-2}"; }

# ---- d: NCCL at one rank, asked for by name ----------------------------------------
# dist.backend = "auto" at one rank reduces nothing (the "local" backend), so
# no other check starts NCCL; this one does, on purpose: the NCCL bootstrap
# and a one-rank reduce-scatter and all-gather per step, against
# c_cuda_vs_cpu's cuda run of the same seed and steps.
check_d_nccl() {
  local r=$RUNS/d-nccl ref=$RUNS/c-fp32/cuda cj backend
  [ "$DRY" = 1 ] && { emit skip "dry run: NCCL needs CUDA"; return; }
  [ "${VITKD_GPU_HAVE_NCCL:-0}" = 1 ] || { emit skip "this vitkd was built without NCCL"; return; }
  rm -rf "$r"
  train1 "$r" cuda --set dist.backend=nccl || { emit fail "the one-rank run with dist.backend = nccl failed (see the log)"; return; }
  backend=$("$PYTHON" -c 'import json, sys; print(json.load(open(sys.argv[1])).get("comm_backend"))' "$r/result.json" 2>/dev/null)
  [ "$backend" = nccl ] || { emit fail "dist.backend = nccl ran with the '$backend' backend"; return; }
  cj=$(cmp_json "$(last_ckpt "$ref")" "$(last_ckpt "$r")" model optimizer)
  echo "$cj"
  verdict "$cj" 1e-6 "$STEPS fp32 steps, NCCL at one rank against no communicator, model+optimizer"
}

# ---- e: 2 ranks x 32 sharing the GPU against 1 rank x 64 -------------------------
check_e_two_ranks() {
  local dev=cuda r=$RUNS/e cj
  [ "$DRY" = 1 ] && dev=cpu
  [ -n "$MPIEXEC" ] || { emit fail "no MPI launcher (MPIEXEC) known to the checks"; return; }
  rm -rf "$r"
  train1 "$r/one" "$dev" --set dist.backend=mpi --set data.batch_size=64 || { emit fail "1-rank run failed"; return; }
  # shellcheck disable=SC2086
  "$MPIEXEC" ${MPI_BIND:-} ${MPIEXEC_NUMPROC_FLAG:--n} 2 ${MPIEXEC_PREFLAGS:-} "$VITKD" ${MPIEXEC_POSTFLAGS:-} \
    train "$ROOT/inputs/fmnist-teacher.toml" --set run.device="$dev" "${QUICK[@]}" "${FP32[@]}" \
    --set train.max_steps="$STEPS" --set data.path="$DATA" --set run.out_dir="$r/two" \
    --set dist.backend=mpi --set data.batch_size=32 || { emit fail "2-rank run ($MPIEXEC -n 2) failed"; return; }
  cj=$(cmp_json "$(last_ckpt "$r/one")" "$(last_ckpt "$r/two")" model optimizer)
  echo "$cj"
  verdict "$cj" 1e-5 "$dev, 2 ranks x 32 against 1 rank x 64, $STEPS fp32 steps, model+optimizer"
}

# ---- f: checkpoints GPU -> CPU and CPU -> GPU, bitwise -------------------------------
# A run trains on device X with the schedule of STEPS steps and is stopped at
# step HALF by the test-only preemption (VITKD_TEST_PREEMPT_AT_STEP: it
# finishes the step, writes checkpoint-step<HALF>.h5, exits 75). A copy is
# resumed on device Y with train.max_steps = HALF: no step is left, so Y
# writes the weights and moments it loaded straight back at step HALF, which
# must be bitwise equal to X's. Done cuda -> cpu and cpu -> cuda: together
# GPU -> CPU -> GPU. (A checkpoint written by such a resume has finished its
# schedule and is not resumed again, hence two preempted runs, not a chain.)
# A file not rewritten is "not measured", a fail.
roundtrip() {  # X Y DIR: prints h5cmp's JSON of X's checkpoint against Y's rewrite
  local x=$1 y=$2 r=$3 a before rc
  VITKD_TEST_PREEMPT_AT_STEP=$HALF train1 "$r/a" "$x" --set checkpoint.every_steps=0 >&2
  rc=$?
  a=$r/a/$(printf 'checkpoint-step%08d.h5' "$HALF")
  if [ "$rc" != 75 ] || [ ! -s "$a" ]; then echo "run on $x: exit $rc, no checkpoint at step $HALF" >&2; return 1; fi
  mkdir -p "$r/b"; cp "$a" "$r/b/"
  before=$(stat -c %Y.%s "$r/b/$(basename "$a")")
  sleep 1   # a rewrite within the same second would look unchanged
  train1 "$r/b" "$y" --set checkpoint.resume=auto --set train.max_steps="$HALF" >&2 || return 1
  [ "$(stat -c %Y.%s "$r/b/$(basename "$a")")" != "$before" ] || { echo "$y wrote nothing back (not measured)" >&2; return 1; }
  cmp_json "$a" "$r/b/$(basename "$a")" model optimizer
}
check_f_checkpoint_roundtrip() {
  local g=cuda r=$RUNS/f down up
  [ "$DRY" = 1 ] && g=cpu
  rm -rf "$r"
  down=$(roundtrip "$g" cpu "$r/down") || { emit fail "$g -> cpu: the round trip did not run (see the log)"; return; }
  up=$(roundtrip cpu "$g" "$r/up") || { emit fail "cpu -> $g: the round trip did not run (see the log)" down="$down"; return; }
  echo "$g -> cpu: $down"; echo "cpu -> $g: $up"
  if "$PYTHON" -c 'import json, sys; sys.exit(0 if all(json.loads(a).get("bitwise") and json.loads(a).get("ok") for a in sys.argv[1:]) else 1)' \
       "$down" "$up" 2>/dev/null; then
    emit pass "step-$HALF checkpoints $g -> cpu and cpu -> $g, loaded and written back: bitwise equal (model+optimizer)" down="$down" up="$up"
  else
    emit fail "a step-$HALF checkpoint changed on the way $g -> cpu or cpu -> $g (see the numbers)" down="$down" up="$up"
  fi
}

# shellcheck source=tests/gpu/checks_perf.sh
. "$(dirname "${BASH_SOURCE[0]}")/checks_perf.sh"
