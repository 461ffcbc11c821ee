#pragma once
// Which precision a run computes in (precision.compute) and reduces in
// (precision.reduce), resolved once at start-up.
//
// "auto" is bf16 on a GPU and on a CPU whose bf16 matrix products are really
// faster than its fp32 ones (kBf16Advantage or more, measured by a
// time-boxed probe at a transformer-block shape), fp32 everywhere else: on
// CPUs without native bf16 (AVX2-only, AVX-512 without AVX512_BF16/AMX)
// LibTorch emulates bf16 and a bf16 run is many times slower. An explicit
// "bf16" on such a CPU still runs in bf16, with one warning giving the
// measured ratio. Every rank takes part in the probe and all agree on the
// slowest rank's ratio, so that heterogeneous nodes choose alike.
#include <torch/torch.h>

#include <string>

namespace vitkd {

/// bf16 must multiply at least this many times faster than fp32 for "auto"
/// to choose it (the step also pays casts and fp32 element-wise work).
constexpr double kBf16Advantage = 1.5;

struct PrecisionChoice {
  std::string requested;       ///< precision.compute as configured: "auto" | "bf16" | "fp32"
  std::string compute;         ///< what runs: "bf16" | "fp32"
  std::string reduce;          ///< gradient reduce-scatter type: "bf16" | "fp32"
  double bf16_over_fp32 = 0;   ///< probe's bf16/fp32 matrix-product rate ratio (0 = not probed)
  double probe_seconds = 0;    ///< wall time of the probe on this rank (0 = not probed)
  std::string why;             ///< for the start-up line, e.g. "auto: bf16 matrix products 0.06x fp32 ..."
  bool bf16() const { return compute == "bf16"; }
};

/// The probe alone: bf16/fp32 rate ratio of one matrix product at a
/// transformer-block shape (512x192 by 192x768) on this rank's threads, each
/// precision timed for at most `budget_seconds` / 2 after one untimed call.
/// Sets `seconds` to its wall time. 0 when LibTorch cannot multiply bf16
/// here at all (`error` then says why). Not collective.
double probe_bf16_over_fp32(double budget_seconds, double* seconds = nullptr, std::string* error = nullptr);

/// The rule alone, for a measured `bf16_over_fp32` (0 = not probed or bf16
/// unavailable; ignored on a GPU and for "fp32"): what runs and why.
PrecisionChoice decide_precision(const std::string& compute, const std::string& reduce, bool gpu,
                                 double bf16_over_fp32, double probe_seconds, const std::string& cpu_flags);

/// Resolves precision.compute and precision.reduce for a run on `device`:
/// probes only on a CPU with compute "auto" or "bf16". Collective (every rank
/// probes; the slowest rank's ratio decides). Prints nothing: the caller
/// echoes `why` and warns with precision_warning().
PrecisionChoice choose_precision(const std::string& compute, const std::string& reduce,
                                 const torch::Device& device);

/// One warning line for an explicit "bf16" that the hardware does not speed
/// up ("" when there is nothing to warn about).
std::string precision_warning(const PrecisionChoice& p);

/// The CPU's native bf16 instructions as /proc/cpuinfo names them
/// ("avx512_bf16 amx_bf16", "none", or "unknown" off Linux).
std::string cpu_bf16_flags();

}  // namespace vitkd
