#include "model/precision.hpp"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "comm/world.hpp"
#include "util/error.hpp"
#include "util/strings.hpp"
#include "util/timing.hpp"

namespace vitkd {
namespace {

// Seconds per call of C = A B, best of the calls that fit in `budget` after
// one untimed call (kernel selection, packing buffers), at least one timed.
// The whole budget is used (up to 200 calls): on a busy machine the best of
// the first 10 calls alone was often slowed, pushing the bf16/fp32 ratio of
// a 2-core AMD EPYC from about 2 towards kBf16Advantage.
double best_call_seconds(torch::ScalarType dtype, double budget) {
  const auto opt = torch::TensorOptions().dtype(dtype);
  torch::manual_seed(0);
  auto a = torch::randn({512, 192}, opt), b = torch::randn({192, 768}, opt);
  auto c = torch::matmul(a, b);
  const auto t0 = Clock::now();
  double best = 1e300;
  for (int i = 0; i < 200; ++i) {
    const auto t = Clock::now();
    torch::matmul_out(c, a, b);
    best = std::min(best, seconds_since(t));
    if (seconds_since(t0) >= budget) break;
  }
  return best;
}


}  // namespace

double probe_bf16_over_fp32(double budget_seconds, double* seconds, std::string* error) {
  torch::NoGradGuard ng;
  const auto t0 = Clock::now();
  double ratio = 0;
  try {
    const double fp32 = best_call_seconds(torch::kFloat32, budget_seconds / 2);
    const double bf16 = best_call_seconds(torch::kBFloat16, budget_seconds / 2);
    ratio = fp32 / std::max(bf16, 1e-12);  // rate ratio = inverse time ratio
  } catch (const std::exception& e) {
    // e.g. oneDNN restricted below bf16 support (ONEDNN_MAX_CPU_ISA=AVX2)
    // while LibTorch still sends it bf16 products: oneDNN's own exception.
    if (error) *error = e.what();
  }
  if (seconds) *seconds = seconds_since(t0);
  return ratio;
}

std::string cpu_bf16_flags() {
  std::ifstream in("/proc/cpuinfo");
  if (!in) return "unknown";
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("flags", 0) != 0) continue;
    std::istringstream words(line.substr(line.find(':') + 1));
    std::string w, out;
    while (words >> w)
      if (w == "avx512_bf16" || w == "amx_bf16") out += (out.empty() ? "" : " ") + w;
    return out.empty() ? "none" : out;
  }
  return "unknown";
}

std::string cpu_identity() {
  std::ifstream in("/proc/cpuinfo");
  std::string line, vendor = "unknown", family = "?", model = "?";
  auto value = [&] {
    std::istringstream v(line.substr(line.find(':') + 1));
    std::string w;
    v >> w;
    return w;
  };
  while (std::getline(in, line)) {
    if (line.rfind("vendor_id", 0) == 0) vendor = value();
    else if (line.rfind("cpu family", 0) == 0) family = value();
    else if (line.rfind("model", 0) == 0 && line.rfind("model name", 0) != 0) model = value();
    else if (line.empty() && vendor != "unknown") break;  // the first processor's block is enough
  }
  std::string flags = cpu_bf16_flags();
  for (char& c : flags)
    if (c == ' ') c = '+';
  return vendor + "-f" + family + "-m" + model + "-" + flags;
}

namespace {

// oneDNN ISA names (ONEDNN_MAX_CPU_ISA) that stop below native bf16
// products; any other value (AVX512_CORE_BF16, AVX512_CORE_AMX, ALL, ...)
// leaves them on.
bool caps_below_bf16(std::string isa) {
  for (char& c : isa) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  for (const char* low : {"SSE41", "AVX", "AVX2", "AVX2_VNNI", "AVX2_VNNI_2", "AVX512_CORE", "AVX512_CORE_VNNI"})
    if (isa == low) return true;
  return false;
}

}  // namespace

bool bf16_is_native(const std::string& cpu_flags, const std::string& onednn_isa_cap) {
  std::istringstream words(cpu_flags);
  bool flag = false;
  for (std::string w; words >> w;) flag = flag || w == "avx512_bf16" || w == "amx_bf16";
  return flag && !caps_below_bf16(onednn_isa_cap);
}

std::string onednn_isa_cap() {
  for (const char* name : {"ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA"})
    if (const char* v = std::getenv(name); v && *v) return v;
  return "";
}

PrecisionChoice decide_precision(Precision compute, Precision reduce, bool gpu, bool native,
                                 double bf16_over_fp32, double probe_seconds, const std::string& cpu_why) {
  PrecisionChoice p;
  p.requested = compute;
  p.reduce_requested = reduce;
  p.native_bf16 = gpu || native;
  if (compute == Precision::Fp32) {
    p.compute = Precision::Fp32;
    p.why = "as configured";
  } else if (gpu) {
    p.compute = Precision::Bf16;
    p.why = compute == Precision::Auto ? "auto: bf16 on a GPU" : "as configured";
  } else {
    p.bf16_over_fp32 = bf16_over_fp32;
    p.probe_seconds = probe_seconds;
    const bool fails = probe_seconds > 0 && bf16_over_fp32 <= 0;
    const std::string measured =
        fails ? std::string("bf16 matrix products fail in LibTorch here")
              : "bf16 matrix products " + fmt("%.2f", bf16_over_fp32) + "x fp32 in a " + fmt("%.2f", probe_seconds) +
                    " s probe";
    if (compute == Precision::Auto) {
      p.compute = native && !fails ? Precision::Bf16 : Precision::Fp32;
      p.why = "auto: " + cpu_why + (native ? ", native bf16" : ", no native bf16") + "; " + measured;
    } else {
      p.compute = Precision::Bf16;
      p.why = "as configured; " + cpu_why + "; " + measured;
    }
  }
  p.reduce = reduce == Precision::Auto ? p.compute : reduce;
  return p;
}

void resolve_gather(Precision requested, PrecisionChoice& p) {
  if (requested == Precision::Bf16 && !p.bf16())
    throw UserError(setting_text("precision.gather", Precision::Bf16) + " gathers a bf16 copy for bf16 compute, and "
                    "this run computes in fp32 (precision.compute, " + p.why + "); set " +
                    setting_text("precision.gather", Precision::Auto) + " or " +
                    setting_text("precision.compute", Precision::Bf16));
  p.gather = requested == Precision::Auto ? p.compute : requested;
}

PrecisionChoice choose_precision(Precision compute, Precision reduce, const torch::Device& device) {
  if (compute == Precision::Fp32 || device.is_cuda())
    return decide_precision(compute, reduce, device.is_cuda(), device.is_cuda(), 0, 0, "");
  // 0.2 s at most per rank: a fast bf16 unit answers in a few ms, an
  // emulated one (about 30 ms a call) in two or three calls. The ratio
  // describes; only a failing bf16 product changes the choice.
  double seconds = 0;
  const double mine = probe_bf16_over_fp32(0.2, &seconds);
  const double slowest = -allreduce_max(-mine);  // the same on every rank
  const std::string flags = cpu_bf16_flags(), cap = onednn_isa_cap();
  const bool native = -allreduce_max(bf16_is_native(flags, cap) ? -1.0 : 0.0) > 0;  // every rank native
  const std::string cpu_why = "CPU bf16 flags: " + flags + (cap.empty() ? "" : ", oneDNN capped at " + cap);
  return decide_precision(compute, reduce, false, native, slowest, allreduce_max(seconds), cpu_why);
}

std::string precision_warning(const PrecisionChoice& p) {
  if (p.probe_seconds <= 0) return "";  // fp32 as configured, or a GPU
  const std::string ratio = fmt("%.2f", p.bf16_over_fp32) + "x";
  const std::string is_auto = setting_text("precision.compute", Precision::Auto);
  const std::string is_bf16 = setting_text("precision.compute", Precision::Bf16);
  const std::string is_fp32 = setting_text("precision.compute", Precision::Fp32);
  if (p.requested == Precision::Auto) {
    if (p.bf16_over_fp32 <= 0) return "";  // bf16 fails: fp32, as the start-up line says
    if (p.native_bf16 && p.bf16_over_fp32 < kBf16Contradiction)
      return is_auto + " chose bf16 for this CPU's native bf16, but bf16 matrix products measured " + ratio +
             " fp32 here (a busy machine reads low); if that persists, set " + is_fp32;
    if (!p.native_bf16 && p.bf16_over_fp32 >= kBf16Advantage)
      return is_auto + " chose fp32 (no native bf16 known here), but bf16 matrix products measured " + ratio +
             " fp32; set " + is_bf16 + " to use them";
    return "";
  }
  if (p.requested != Precision::Bf16 || p.bf16_over_fp32 >= kBf16Advantage) return "";
  const std::string fix = "set " + is_auto + " or \"" + choice_name(Precision::Fp32) + "\"";
  if (p.bf16_over_fp32 <= 0)
    return is_bf16 + ", but LibTorch cannot multiply bf16 matrices on this CPU (as configured it may be "
           "restricted below bf16 support); " + fix;
  return is_bf16 + " on a CPU whose bf16 matrix products run at " + ratio +
         " the fp32 rate (bf16 is emulated here); training will be slow; " + fix;
}

}  // namespace vitkd
