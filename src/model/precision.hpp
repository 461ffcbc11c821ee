#pragma once
// Which precision a run computes in (precision.compute) and reduces in
// (precision.reduce), resolved once at start-up.
//
// "auto" follows from what the machine is, never from how busy it is, so
// that one machine always gives one answer (the rule, bf16_is_native()):
//
//   device / CPU                                   | "auto"
//   -----------------------------------------------+-------
//   a GPU                                          | bf16
//   CPU flag avx512_bf16 or amx_bf16, and oneDNN   | bf16
//     not capped below bf16 (ONEDNN_MAX_CPU_ISA /  |
//     DNNL_MAX_CPU_ISA unset, or AVX512_CORE_BF16  |
//     and above), and LibTorch runs a bf16 product |
//   anything else (AVX2-only, AVX-512 without      | fp32
//     AVX512_BF16/AMX, flags unreadable, oneDNN    |
//     capped, bf16 products failing)               |
//
// On CPUs without native bf16 LibTorch emulates it and a bf16 run is many
// times slower. A short probe still times fp32 and bf16 products at a
// transformer-block shape, for the start-up line and result.json, and to warn
// once where the measurement contradicts the rule; it never changes the
// choice. An explicit "bf16" on a CPU where the probe finds bf16 slower
// than kBf16Advantage x fp32 runs in bf16 with one warning giving the ratio.
// Every rank takes part; the ranks agree on the rule (native only if native
// on every rank) and on the slowest rank's ratio.
#include <torch/torch.h>

#include <string>

#include "config/choices.hpp"

namespace vitkd {

/// An explicit "bf16" whose products measure below this many times fp32 warns
/// that it is slow; "auto" on a CPU without native bf16 that measures this
/// much or more warns that "bf16" would pay (the step also pays casts and
/// fp32 element-wise work).
constexpr double kBf16Advantage = 1.5;
/// "auto" on a CPU with native bf16 whose bf16 products measure below this
/// many times fp32 warns that the measurement contradicts the rule.
constexpr double kBf16Contradiction = 1.0;

struct PrecisionChoice {
  Precision requested = Precision::Auto;  ///< precision.compute as configured
  Precision compute = Precision::Fp32;    ///< what runs: Bf16 | Fp32
  Precision reduce = Precision::Fp32;     ///< gradient reduce-scatter type: Bf16 | Fp32
  Precision reduce_requested = Precision::Fp32;  ///< precision.reduce as configured (Auto: follows compute)
  /// The parameters' all-gather and the copy the forward pass reads
  /// (precision.gather, resolved by resolve_gather): Bf16 | Fp32.
  Precision gather = Precision::Fp32;
  bool native_bf16 = false;    ///< the rule: this CPU (every rank's) has native bf16 products; true on a GPU
  double bf16_over_fp32 = 0;   ///< probe's bf16/fp32 matrix-product rate ratio (0 = not probed)
  double probe_seconds = 0;    ///< wall time of the probe on this rank (0 = not probed)
  std::string why;             ///< for the start-up line, e.g. "auto: bf16 matrix products 0.06x fp32 ..."
  bool bf16() const { return compute == Precision::Bf16; }
};

/// The probe alone: bf16/fp32 rate ratio of one matrix product at a
/// transformer-block shape (512x192 by 192x768) on this rank's threads, each
/// precision timed for at most `budget_seconds` / 2 after one untimed call.
/// Sets `seconds` to its wall time. 0 when LibTorch cannot multiply bf16
/// here at all (`error` then says why). Not collective.
double probe_bf16_over_fp32(double budget_seconds, double* seconds = nullptr, std::string* error = nullptr);

/// The rule's CPU half: native bf16 products from the CPU's bf16 flags (as
/// cpu_bf16_flags() gives them) and oneDNN's ISA cap (the value of
/// ONEDNN_MAX_CPU_ISA, else DNNL_MAX_CPU_ISA; "" = none). Pure.
bool bf16_is_native(const std::string& cpu_flags, const std::string& onednn_isa_cap);

/// oneDNN's ISA cap from the environment ("" when neither variable is set).
std::string onednn_isa_cap();

/// The decision alone: `native` from bf16_is_native() (ignored on a GPU);
/// the probe's `bf16_over_fp32` (0 = not probed, or, with probe_seconds > 0,
/// bf16 products failing here) only describes and warns, except that a
/// failing bf16 product means fp32. `cpu_why` names the facts behind
/// `native` for the start-up line. What runs and why.
PrecisionChoice decide_precision(Precision compute, Precision reduce, bool gpu, bool native,
                                 double bf16_over_fp32, double probe_seconds, const std::string& cpu_why);

/// Resolves precision.compute and precision.reduce for a run on `device`:
/// probes only on a CPU with compute "auto" or "bf16". Collective (every rank
/// probes; native only where every rank is native, the slowest rank's ratio
/// reported). Prints nothing: the caller echoes `why` and warns with
/// precision_warning().
PrecisionChoice choose_precision(Precision compute, Precision reduce, const torch::Device& device);

/// Resolves precision.gather against the compute precision chosen: "auto"
/// follows it; "bf16" with fp32 compute is a UserError naming the keys.
void resolve_gather(Precision requested, PrecisionChoice& p);

/// One warning line for an explicit "bf16" that the hardware does not speed
/// up, or for an "auto" whose probe contradicts the rule ("" when there is
/// nothing to warn about).
std::string precision_warning(const PrecisionChoice& p);

/// The CPU's native bf16 instructions as /proc/cpuinfo names them
/// ("avx512_bf16 amx_bf16", "none", or "unknown" off Linux).
std::string cpu_bf16_flags();

/// The CPU as one word, for keys that must tell CPUs apart where host names do
/// not (a cloud image's host name is the same on every CPU it boots on):
/// vendor, family, model and the bf16 flags, e.g.
/// "GenuineIntel-f6-m167-avx512_bf16+amx_bf16" ("unknown-f?-m?-unknown" off Linux).
std::string cpu_identity();

}  // namespace vitkd
