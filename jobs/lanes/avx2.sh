#!/usr/bin/env bash
# The AVX2 lane of jobs/test.sh: the tests whose result depends on the
# instruction set, again with LibTorch restricted as on CPUs without native
# bf16, so that such a CPU is covered wherever the suite runs:
#   avx2         ATEN_CPU_CAPABILITY=avx2 (ATen's AVX2 kernels, as on an AVX2-only
#                EPYC or Xeon) and ONEDNN_MAX_CPU_ISA=AVX2 (oneDNN 2.6 reads the
#                ONEDNN_ and the DNNL_ name). LibTorch 1.13 asks cpuinfo, not oneDNN,
#                whether bf16 products are there, so oneDNN then refuses them
#                ("could not create a primitive descriptor iterator"): "auto" must
#                choose fp32 (the rule of src/model/precision.hpp reads the cap), and
#                the tests that need a bf16 product skip. What runs: every unit test
#                (numerics on ATen's AVX2 kernels), the C++ ViT and training against
#                PyTorch, the precision cases, and fp32 training end to end (distillation,
#                bit-exact resume after a preemption and after SIGUSR1, evaluations).
#   avx512-core  ATEN_CPU_CAPABILITY=avx2 with ONEDNN_MAX_CPU_ISA=AVX512_CORE: AVX-512
#                without AVX512_BF16 (Skylake/Cascade Lake class), where oneDNN emulates
#                bf16 (about 0.7x fp32): "auto" must choose fp32, an explicit bf16 runs
#                and warns. What runs: the Precision unit tests and the precision cases
#                (the rest computes as under avx2: fp32 on OpenBLAS and ATen's AVX2).
# Needs the build of jobs/build.sh. Under avx2 OpenBLAS (the fp32 products)
# also runs its AVX2 kernels (OPENBLAS_CORETYPE=Haswell), which round a row of
# a product by its place in the batch: the exact replay of a teacher-view cache
# (distill.view_cache_replays_augmented_views) then fails if the cache was not
# written on the training's batches, as it would on an AVX2-only CPU.
# The unit tests run in one process (build/tests/vitkd_unit_tests), as CTest's
# per-suite tests would, without a LibTorch start per suite.
# On a CPU without AVX-512 both restrictions are what LibTorch and OpenBLAS pick
# anyway, so the main lane has run these tests as they would run here: the lane
# says so and stops (about 5 minutes of CI on such a machine). VITKD_AVX2_LANE=force
# runs it anyway.
set -euo pipefail
cd "$(dirname "$0")/../.."
source jobs/env.sh
J=$VITKD_TEST_JOBS
if ! grep -qw avx512f /proc/cpuinfo && [ "${VITKD_AVX2_LANE:-}" != force ]; then
  echo "lane avx2: this CPU has no AVX-512 ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | xargs));" \
       "the main lane ran every test on AVX2 kernels already (VITKD_AVX2_LANE=force runs the lane anyway)"
  exit 0
fi
E2E_AVX2='^((precision|distill|evaluation)\..*|resume\.(setup|preempted_run_resumes_bit_identical|sigusr1_checkpoints_and_resumes_exactly))\.np2$|^reference\.'
E2E_AVX512_CORE='^precision\..*\.np2$'
for restriction in avx2 avx512-core; do
  case $restriction in
    avx2) isa=AVX2 units='*' e2e=$E2E_AVX2; export OPENBLAS_CORETYPE=Haswell ;;
    avx512-core) isa=AVX512_CORE units='Precision.*' e2e=$E2E_AVX512_CORE; unset OPENBLAS_CORETYPE ;;
  esac
  export ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=$isa DNNL_MAX_CPU_ISA=$isa
  echo "lane avx2 ($restriction): ATEN_CPU_CAPABILITY=$ATEN_CPU_CAPABILITY ONEDNN_MAX_CPU_ISA=$isa" \
       "OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-native}"
  # The restriction must reach LibTorch: "auto" then chooses fp32.
  # (tee -a: a plain `tee /dev/stderr` reopens a log file that stderr is with O_TRUNC, erasing it)
  pick=$(build/vitkd bench gemm --millis 20 | tee -a /dev/stderr | grep 'precision.compute = "auto" chooses')
  [[ $pick == *"chooses fp32"* ]] || { echo "lane avx2: the restriction did not take: $pick" >&2; exit 1; }
  export VITKD_EXPECT_COMPUTE=fp32
  (cd build/tests && ./vitkd_unit_tests --gtest_filter="$units" --gtest_brief=1)
  ctest --test-dir build --output-on-failure -j "$J" --timeout 600 -R "$e2e"
done
