#!/usr/bin/env bash
# The AVX2 lane of jobs/test.sh: the unit tests and a set of end-to-end
# training tests again, with LibTorch restricted as on CPUs without native
# bf16, so that such a CPU is covered wherever the suite runs:
#   avx2         ATEN_CPU_CAPABILITY=avx2 (ATen's AVX2 kernels, as on an AVX2-only
#                EPYC or Xeon) and ONEDNN_MAX_CPU_ISA=AVX2 (oneDNN 2.6 reads the
#                ONEDNN_ and the DNNL_ name). LibTorch 1.13 asks cpuinfo, not oneDNN,
#                whether bf16 products are there, so oneDNN then refuses them
#                ("could not create a primitive descriptor iterator"): "auto" must
#                choose fp32, and the tests that need a bf16 product skip.
#   avx512-core  ATEN_CPU_CAPABILITY=avx2 with ONEDNN_MAX_CPU_ISA=AVX512_CORE: AVX-512
#                without AVX512_BF16 (Skylake/Cascade Lake class), where oneDNN emulates
#                bf16 (about 0.7x fp32): "auto" must choose fp32, an explicit bf16 runs
#                and warns.
# Needs the build of jobs/build.sh. OpenBLAS (fp32 products) is not restricted.
set -euo pipefail
cd "$(dirname "$0")/../.."
source jobs/env.sh
t0=$(date +%s)
E2E='^(precision|resume\.(setup|preempted_run_resumes_bit_identical|sigusr1_checkpoints_and_resumes_exactly)|distill|evaluation)\..*\.np2$|^reference\.'
for restriction in avx2 avx512-core; do
  case $restriction in
    avx2) isa=AVX2 ;;
    avx512-core) isa=AVX512_CORE ;;
  esac
  export ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=$isa DNNL_MAX_CPU_ISA=$isa
  echo "lane avx2 ($restriction): ATEN_CPU_CAPABILITY=$ATEN_CPU_CAPABILITY ONEDNN_MAX_CPU_ISA=$isa"
  # The restriction must reach LibTorch: "auto" then chooses fp32.
  # (tee -a: a plain `tee /dev/stderr` reopens a log file that stderr is with O_TRUNC, erasing it)
  pick=$(build/vitkd bench gemm --millis 20 | tee -a /dev/stderr | grep 'precision.compute = "auto" chooses')
  [[ $pick == *"chooses fp32"* ]] || { echo "lane avx2: the restriction did not take: $pick" >&2; exit 1; }
  export VITKD_EXPECT_COMPUTE=fp32
  ctest --test-dir build --output-on-failure -j "$(nproc --all)" --timeout 600 -L unit
  ctest --test-dir build --output-on-failure -j "$(nproc --all)" --timeout 600 -R "$E2E"
done
echo "lane avx2: $(( $(date +%s) - t0 )) s"
