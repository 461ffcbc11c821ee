#!/usr/bin/env bash
# precision.compute at NP ranks: what "auto" chooses on this CPU, what it
# records, the warning for an explicit bf16 that the CPU does not speed up,
# and resumes across precisions. Run natively and again in the AVX2 lane
# (jobs/lanes/avx2.sh), where VITKD_EXPECT_COMPUTE says what auto must pick.
#   auto_records_what_it_chose        result.json, the checkpoint and the start-up line name
#                                     the precision that ran; bf16 exactly when the CPU has
#                                     avx512_bf16 or amx_bf16 and oneDNN is not capped below
#                                     bf16 (the rule of model/precision.hpp, restated here)
#   auto_is_the_same_under_load       two busy loops beside two runs of one command: both
#                                     choose what the rule gives, whatever the probe reads
#   resume_keeps_the_recorded_precision
#                                     a checkpoint computed in the other precision: "auto"
#                                     resumes in it; an explicit value wins, with one line
#   fp32_asks_for_no_probe            precision.compute = "fp32": no probe, "as configured"
#   explicit_bf16_warns_once_where_slow
#                                     "bf16" runs in bf16; one warning with the measured
#                                     ratio where bf16 is not faster, none where it is
#   bf16_checkpoint_resumes_in_fp32_and_back
#                                     preempted in one precision, resumed in the other: the
#                                     first steps are the first precision's, the checkpoint
#                                     records the second, the weights stay near either run's
#   bad_value_is_one_line             precision.compute = "fast": one line naming the key and values
#   mfu_ceiling_is_kept_once          the MFU ceiling measured by the first run, kept per machine and read
#                                     by the next (the same figure in the start-up line, result.json and
#                                     timing.h5); a kept ceiling below the run's own rate: no MFU above 1
#                                     written, one warning, both figures in result.json
#   e2e_precision.sh --list | CASE NP ROOT    (tests/lib/common.sh)
source "$(dirname "$0")/../lib/common.sh"
CASES=(setup auto_records_what_it_chose:setup auto_is_the_same_under_load:setup
       resume_keeps_the_recorded_precision:setup fp32_asks_for_no_probe:setup
       explicit_bf16_warns_once_where_slow:setup bf16_checkpoint_resumes_in_fp32_and_back:setup
       bad_value_is_one_line:setup mfu_ceiling_is_kept_once:setup)
SETUP=${3-}/setup
T=(train "$SETUP/tiny.toml")
export MPI_TIMEOUT=120

case_setup() {
  synthetic syn.h5 192 64 8 4 --seed 4
  tiny_config tiny.toml "data.path=\"$WORK/syn.h5\"" 'precision.compute="auto"' train.max_steps=20 train.timing_every_steps=5 \
    checkpoint.every_steps=0 train.eval_every_epochs=0
}

# check_recorded DIR: result.json's compute against the rule (CPU flags and
# oneDNN's cap; VITKD_EXPECT_COMPUTE where the caller knows better) and the
# checkpoint's attribute; prints the precision that ran and the probe's ratio.
check_recorded() {
  "$PYTHON" - "$1" "${VITKD_EXPECT_COMPUTE-}" <<'PY'
import h5py, json, os, re, sys
d, expect = sys.argv[1], sys.argv[2]
r = json.load(open(f"{d}/result.json"))
ratio = r["bf16_over_fp32_gemm"]
assert r["compute"] in ("bf16", "fp32"), r["compute"]
if r["compute_requested"] == "auto" and "kept from" not in r["compute_reason"]:
    m = re.search(r"^flags\s*:(.*)$", open("/proc/cpuinfo").read(), re.M)
    flags = set(m.group(1).split()) if m else set()
    cap = (os.environ.get("ONEDNN_MAX_CPU_ISA") or os.environ.get("DNNL_MAX_CPU_ISA") or "").upper()
    low = {"SSE41", "AVX", "AVX2", "AVX2_VNNI", "AVX2_VNNI_2", "AVX512_CORE", "AVX512_CORE_VNNI"}
    native = bool(flags & {"avx512_bf16", "amx_bf16"}) and cap not in low and ratio > 0
    expect = expect or ("bf16" if native else "fp32")
    assert r["compute_reason"].startswith("auto: "), r["compute_reason"]
    assert r["compute"] == expect, f"auto chose {r['compute']} (ratio {ratio}), expected {expect}"
with h5py.File(f"{d}/checkpoint.h5", "r") as f:
    got = f.attrs["compute"]
    got = got.decode() if isinstance(got, bytes) else str(got)
    assert got == r["compute"], (got, r["compute"])
with h5py.File(f"{d}/timing.h5", "r") as f:
    got = f.attrs["compute"]
    got = got.decode() if isinstance(got, bytes) else str(got)
    assert got == r["compute"], ("timing.h5", got, r["compute"])
print(r["compute"], ratio)
PY
}

case_auto_records_what_it_chose() {
  expect 0 vk "$NP" "${T[@]}" --set run.out_dir=auto
  read -r compute ratio < <(check_recorded auto)
  grep -qE "compute $compute \(auto: CPU bf16 flags: [a-z0-9_ ]+.*native bf16; bf16 matrix products " last.log ||
    fail "the start-up line does not say what auto chose and why"
  echo "auto chose $compute (bf16/fp32 ratio $ratio)"
}

case_auto_is_the_same_under_load() {
  local pids=() i
  for i in 1 2; do (while :; do :; done) & pids+=($!); done
  # shellcheck disable=SC2064
  trap "kill ${pids[*]} 2>/dev/null || true" EXIT
  expect 0 vk "$NP" "${T[@]}" --set run.out_dir=l1
  expect 0 vk "$NP" "${T[@]}" --set run.out_dir=l2
  kill "${pids[@]}"
  trap - EXIT
  local c1 r1 c2 r2
  read -r c1 r1 < <(check_recorded l1) || fail "l1: auto did not follow the rule"
  read -r c2 r2 < <(check_recorded l2) || fail "l2: auto did not follow the rule"
  [ "$c1" = "$c2" ] || fail "one command under load chose $c1 (probe ${r1}x) and $c2 (probe ${r2}x)"
  echo "under load: $c1 twice (probe ${r1}x and ${r2}x)"
}

case_resume_keeps_the_recorded_precision() {
  local auto other
  auto=$(auto_compute)
  [ -n "$auto" ] || fail "vitkd bench gemm did not say what auto chooses"
  if [ "$auto" = bf16 ]; then other=fp32; else other=bf16; fi
  if [ "$other" = bf16 ] && bf16_unavailable; then
    echo "SKIP: LibTorch cannot multiply bf16 matrices here (oneDNN restricted below bf16 support)"
    exit 77
  fi
  # "auto" resumes a checkpoint computed in the other precision in that precision.
  expect 75 vk "$NP" VITKD_TEST_PREEMPT_AT_STEP=10 "${T[@]}" --set run.out_dir=k --set precision.compute="$other"
  expect 0 vk "$NP" "${T[@]}" --set run.out_dir=k
  grep -q "compute $other (auto: kept from k/checkpoint.h5, which was computed in $other" last.log ||
    fail "auto did not keep the checkpoint's $other"
  read -r got _ < <(check_recorded k)
  [ "$got" = "$other" ] || fail "auto resumed a $other checkpoint in $got"
  # An explicit value wins, with one line.
  expect 75 vk "$NP" VITKD_TEST_PREEMPT_AT_STEP=10 "${T[@]}" --set run.out_dir=e --set precision.compute="$other"
  expect 0 vk "$NP" "${T[@]}" --set run.out_dir=e --set precision.compute="$auto"
  [ "$(grep -c "precision: computing in $auto as configured (precision.compute); e/checkpoint.h5 was computed in $other" last.log)" = 1 ] ||
    fail "an explicit $auto over a $other checkpoint: not one line saying so"
  read -r got _ < <(check_recorded e)
  [ "$got" = "$auto" ] || fail "explicit $auto ran in $got"
}

case_fp32_asks_for_no_probe() {
  expect 0 vk "$NP" "${T[@]}" --set run.out_dir=f --set precision.compute=fp32
  grep -q "compute fp32 (as configured)" last.log || fail "no 'compute fp32 (as configured)'"
  read -r compute ratio < <(check_recorded f)
  [ "$compute" = fp32 ] || fail "precision.compute = fp32 recorded $compute"
  "$PYTHON" -c "import sys; sys.exit(float(sys.argv[1]) != 0)" "$ratio" || fail "fp32 ran the probe (ratio $ratio)"
}

case_explicit_bf16_warns_once_where_slow() {
  if bf16_unavailable; then
    echo "SKIP: LibTorch cannot multiply bf16 matrices here (oneDNN restricted below bf16 support)"
    exit 77
  fi
  expect 0 vk "$NP" "${T[@]}" --set run.out_dir=b --set precision.compute=bf16
  read -r compute ratio < <(check_recorded b)
  [ "$compute" = bf16 ] || fail "explicit bf16 ran in $compute"
  local warnings
  warnings=$(grep -c 'warning: precision.compute = "bf16"' last.log || true)
  if "$PYTHON" -c "import sys; sys.exit(0 if float(sys.argv[1]) < 1.5 else 1)" "$ratio"; then
    [ "$warnings" = 1 ] || fail "bf16 at ${ratio}x fp32: $warnings warnings, expected 1"
    grep -q "$(printf '%.2fx' "$ratio")" last.log || fail "the warning lacks the ratio ${ratio}"
  else
    [ "$warnings" = 0 ] || fail "bf16 at ${ratio}x fp32 warned"
  fi
}

# Where oneDNN is restricted below bf16 (ONEDNN_MAX_CPU_ISA=AVX2), LibTorch
# 1.13 cannot run a bf16 product at all (it asks cpuinfo, not oneDNN, whether
# bf16 is there); on a real AVX2-only CPU it falls back to its own kernel.
bf16_unavailable() { "$VITKD" bench gemm --auto-only 2>&1 | grep -q "bf16 matrix products fail"; }

# cut_resume FIRST SECOND DIR: FIRST precision to step 10 (preempted), SECOND to step 20.
cut_resume() {
  expect 75 vk "$NP" VITKD_TEST_PREEMPT_AT_STEP=10 "${T[@]}" --set run.out_dir="$3" --set precision.compute="$1"
  expect 0 vk "$NP" "${T[@]}" --set run.out_dir="$3" --set precision.compute="$2"
  grep -q "resume: from $3/checkpoint.h5" last.log || fail "did not resume"
}

case_bf16_checkpoint_resumes_in_fp32_and_back() {
  if bf16_unavailable; then
    echo "SKIP: LibTorch cannot multiply bf16 matrices here (oneDNN restricted below bf16 support)"
    exit 77
  fi
  expect 0 vk "$NP" "${T[@]}" --set run.out_dir=b --set precision.compute=bf16
  expect 0 vk "$NP" "${T[@]}" --set run.out_dir=f --set precision.compute=fp32
  cut_resume bf16 fp32 bf
  cut_resume fp32 bf16 fb
  "$PYTHON" - <<'PY'
import h5py, json
import numpy as np
def attr(d):
    with h5py.File(f"{d}/checkpoint.h5", "r") as f:
        a = f.attrs["compute"]
        return a.decode() if isinstance(a, bytes) else str(a)
def losses(d):
    with h5py.File(f"{d}/timing.h5", "r") as f:
        return dict(zip(f["metrics/step"][()].tolist(), f["metrics/loss"][()].tolist()))
def weights(d):
    with h5py.File(f"{d}/checkpoint.h5", "r") as f:
        return np.concatenate([f["model"][k][()].ravel() for k in sorted(f["model"])]).astype(np.float64)
b, f = weights("b"), weights("f")
assert not np.array_equal(b, f), "bf16 and fp32 gave the same weights: one of them did not run"
for cut, first, second in (("bf", "b", "f"), ("fb", "f", "b")):
    r = json.load(open(f"{cut}/result.json"))
    assert r["steps"] == 20 and r["compute"] == attr(second) == attr(cut), (cut, r["steps"], r["compute"])
    lc, l1 = losses(cut), losses(first)
    # The first 10 steps ran in the first precision (the same computation).
    assert all(lc[s] == l1[s] for s in range(1, 11) if s in lc and s in l1), (cut, lc, l1)
    w = weights(cut)
    assert not np.array_equal(w, weights(first)) and not np.array_equal(w, weights(second)), cut
    # fp32 master weights carried across: near both uninterrupted runs.
    for other in (first, second):
        rel = np.linalg.norm(w - weights(other)) / np.linalg.norm(weights(other))
        assert rel < 0.05, (cut, other, rel)
    print(cut, "ok")
PY
}

case_bad_value_is_one_line() {
  expect_error 2 "precision.compute" "$VITKD" "${T[@]}" --set run.out_dir=x --set precision.compute=fast
  grep -q '"auto", "bf16", "fp32"' last.log || fail "the error does not list the values"
  [ "$(grep -c 'vitkd: error' last.log)" = 1 ] || fail "not one line"
  [ ! -e x ] || fail "wrote run.out_dir"
}

case_mfu_ceiling_is_kept_once() {
  export VITKD_CEILING_FILE=$WORK/ceilings.txt
  local K=(train.mfu_ceiling=0 train.max_steps=4 train.final_eval=false)
  tiny_config first.toml "data.path=\"$SETUP/syn.h5\"" "${K[@]}" 'run.out_dir="first"'
  tiny_config second.toml "data.path=\"$SETUP/syn.h5\"" "${K[@]}" 'run.out_dir="second"'
  tiny_config low.toml "data.path=\"$SETUP/syn.h5\"" "${K[@]}" 'run.out_dir="low"'
  LOG=first.log expect 0 vk "$NP" VITKD_CEILING_FILE="$VITKD_CEILING_FILE" train first.toml
  grep -q "ceiling .* GFLOP/s per core (measured for 1 s, kept in $VITKD_CEILING_FILE)" first.log ||
    { grep ceiling first.log; fail "the first run did not measure and keep its ceiling"; }
  [ "$(wc -l < "$VITKD_CEILING_FILE")" = 1 ] || { cat "$VITKD_CEILING_FILE"; fail "not one kept ceiling"; }
  LOG=second.log expect 0 vk "$NP" VITKD_CEILING_FILE="$VITKD_CEILING_FILE" train second.toml
  grep -q "GFLOP/s per core (kept in $VITKD_CEILING_FILE)" second.log ||
    { grep ceiling second.log; fail "the second run measured again"; }
  # A ceiling kept far too low (as a probe under load would give): no MFU above 1 is written.
  "$PYTHON" - "$VITKD_CEILING_FILE" <<'PY'
import sys
p = sys.argv[1]
k, v = open(p).read().split()
open(p, "w").write(f"{k} 1000.0\n")
PY
  LOG=low.log expect 0 vk "$NP" VITKD_CEILING_FILE="$VITKD_CEILING_FILE" train low.toml
  [ "$(grep -c 'above its MFU ceiling' low.log)" = 1 ] || { cat low.log; fail "expected one warning about the ceiling"; }
  "$PYTHON" - <<'PY'
import json, h5py
first, second, low = (json.load(open(f"{d}/result.json")) for d in ("first", "second", "low"))
assert first["gemm_flops_per_core"] == second["gemm_flops_per_core"] > 0, (first["gemm_flops_per_core"], second["gemm_flops_per_core"])
assert second["gemm_ceiling_source"].startswith("kept in "), second["gemm_ceiling_source"]
assert 0 < second["mfu"] <= 1, second["mfu"]
assert abs(second["mfu"] - second["achieved_flops_per_core"] / second["gemm_flops_per_core"]) < 1e-6 * second["mfu"] + 1e-12
with h5py.File("second/timing.h5", "r") as f:
    assert abs(float(f.attrs["gemm_flops_per_core"]) - second["gemm_flops_per_core"]) <= 1e-9 * second["gemm_flops_per_core"]
assert low["gemm_flops_per_core"] == 1000.0 and low["mfu"] is None and low["mfu_bf16"] is None, low
assert low["achieved_flops_per_core"] > 1000.0, low["achieved_flops_per_core"]
print(f"OK: ceiling {second['gemm_flops_per_core'] / 1e9:.1f} GFLOP/s per core kept; MFU {second['mfu']:.3f}; "
      f"a kept ceiling of 1 kFLOP/s: no MFU, {low['achieved_flops_per_core'] / 1e9:.2f} GFLOP/s per core reached")
PY
}

e2e_main "$@"
