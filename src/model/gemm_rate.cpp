#include "model/gemm_rate.hpp"

#include <torch/cuda.h>

#include "util/timing.hpp"

namespace vitkd {

double gemm_rate(int64_t m, int64_t k, int64_t n, torch::ScalarType dtype, double seconds,
                 const torch::Device& device) {
  const auto opt = torch::TensorOptions().dtype(dtype).device(device);
  auto a = torch::randn({m, k}, opt), b = torch::randn({k, n}, opt);
  auto c = torch::matmul(a, b);  // kernel selection and creation happen here, untimed
  if (device.is_cpu()) {
    const double ms = ms_per_call([&] { torch::matmul_out(c, a, b); }, seconds);
    return 2.0 * m * k * n / (ms * 1e-3);
  }
  // A GPU runs asynchronously: time batches of 10 products, waiting once per batch.
  const int batch = 10;
  const double ms = ms_per_call(
      [&] {
        for (int i = 0; i < batch; ++i) torch::matmul_out(c, a, b);
        torch::cuda::synchronize(device.index());
      },
      seconds);
  return 2.0 * m * k * n * batch / (ms * 1e-3);
}

double measure_gemm_flops(torch::ScalarType dtype, double seconds, const torch::Device& device) {
  const int64_t s = device.is_cpu() ? 2048 : 8192;
  return gemm_rate(s, s, s, dtype, seconds, device);
}

}  // namespace vitkd
