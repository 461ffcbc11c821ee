#include "model/gemm_rate.hpp"

#include "util/timing.hpp"

namespace vitkd {

double gemm_rate(int64_t m, int64_t k, int64_t n, torch::ScalarType dtype, double seconds) {
  auto a = torch::randn({m, k}).to(dtype), b = torch::randn({k, n}).to(dtype);
  auto c = torch::matmul(a, b);  // oneDNN kernel creation happens here, untimed
  const double ms = ms_per_call([&] { torch::matmul_out(c, a, b); }, seconds);
  return 2.0 * m * k * n / (ms * 1e-3);
}

double measure_gemm_bf16_flops(double seconds) {
  return gemm_rate(2048, 2048, 2048, torch::kBFloat16, seconds);
}

}  // namespace vitkd
