#include "model/precision.hpp"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "comm/world.hpp"
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

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
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

PrecisionChoice decide_precision(const std::string& compute, const std::string& reduce, bool gpu,
                                 double bf16_over_fp32, double probe_seconds, const std::string& cpu_flags) {
  PrecisionChoice p;
  p.requested = compute;
  if (compute == "fp32") {
    p.compute = "fp32";
    p.why = "as configured";
  } else if (gpu) {
    p.compute = "bf16";
    p.why = compute == "auto" ? "auto: bf16 on a GPU" : "as configured";
  } else {
    p.bf16_over_fp32 = bf16_over_fp32;
    p.probe_seconds = probe_seconds;
    const bool fast = bf16_over_fp32 >= kBf16Advantage;
    p.compute = compute == "bf16" || fast ? "bf16" : "fp32";
    const std::string measured =
        (bf16_over_fp32 > 0 ? "bf16 matrix products " + fmt("%.2f", bf16_over_fp32) + "x fp32"
                            : std::string("bf16 matrix products fail in LibTorch here")) +
        " in a " + fmt("%.2f", probe_seconds) + " s probe; CPU bf16 flags: " + cpu_flags;
    p.why = compute == "auto" ? "auto: " + measured : "as configured; " + measured;
  }
  p.reduce = reduce == "auto" ? p.compute : reduce;
  return p;
}

PrecisionChoice choose_precision(const std::string& compute, const std::string& reduce,
                                 const torch::Device& device) {
  if (compute == "fp32" || device.is_cuda())
    return decide_precision(compute, reduce, device.is_cuda(), 0, 0, "");
  // 0.2 s at most per rank: a fast bf16 unit answers in a few ms, an
  // emulated one (about 30 ms a call) in two or three calls.
  double seconds = 0;
  const double mine = probe_bf16_over_fp32(0.2, &seconds);
  const double slowest = -allreduce_max(-mine);  // the same on every rank
  return decide_precision(compute, reduce, false, slowest, allreduce_max(seconds), cpu_bf16_flags());
}

std::string precision_warning(const PrecisionChoice& p) {
  if (p.requested != "bf16" || p.probe_seconds <= 0 || p.bf16_over_fp32 >= kBf16Advantage) return "";
  if (p.bf16_over_fp32 <= 0)
    return "precision.compute = \"bf16\", but LibTorch cannot multiply bf16 matrices on this CPU "
           "(as configured it may be restricted below bf16 support); set precision.compute = \"auto\" or \"fp32\"";
  return "precision.compute = \"bf16\" on a CPU whose bf16 matrix products run at " +
         fmt("%.2f", p.bf16_over_fp32) + "x the fp32 rate (bf16 is emulated here); training will be slow; "
         "set precision.compute = \"auto\" or \"fp32\"";
}

}  // namespace vitkd
