#include "model/mixed_add.hpp"

#include <ATen/Parallel.h>
#include <torch/torch.h>

#include <algorithm>

#include "model/clones.hpp"
#include "util/bf16.hpp"

namespace vitkd {
namespace {

constexpr int64_t kChunk = 512;    // values converted to fp32 at a time
constexpr int64_t kGrain = 32768;  // values per thread task
// The bias gradient: rows summed in fixed blocks of kBiasRows, the blocks'
// sums then added in block order, so the result does not depend on the
// thread count (as bias_gelu's, model/gelu.cpp).
constexpr int64_t kBiasRows = 256;

/// y = bf16(float(z) + b) for one row of m values.
VITKD_CLONES void bias_row(const uint16_t* z, const float* b, uint16_t* y, int64_t m) {
  float f[kChunk];
  for (int64_t c = 0; c < m; c += kChunk) {
    const int64_t k = std::min(kChunk, m - c);
    for (int64_t i = 0; i < k; ++i) f[i] = bf16_to_float(z[c + i]) + b[c + i];
    for (int64_t i = 0; i < k; ++i) y[c + i] = float_to_bf16(f[i]);
  }
}

/// acc += float(dy) for one row of m values.
VITKD_CLONES void sum_row(const uint16_t* dy, float* acc, int64_t m) {
  for (int64_t i = 0; i < m; ++i) acc[i] += bf16_to_float(dy[i]);
}

/// y = x + float(a) for n values.
VITKD_CLONES void residual_run(const float* x, const uint16_t* a, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] + bf16_to_float(a[i]);
}

at::Tensor bias_forward(const at::Tensor& z, const at::Tensor& bias) {
  auto y = at::empty_like(z, at::MemoryFormat::Contiguous);
  const int64_t m = z.size(-1), rows = m ? z.numel() / m : 0;
  const uint16_t* zp = bf16_bits(z);
  const float* bp = bias.data_ptr<float>();
  uint16_t* yp = bf16_bits(y);
  at::parallel_for(0, rows, std::max<int64_t>(1, kGrain / std::max<int64_t>(m, 1)), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) bias_row(zp + r * m, bp, yp + r * m, m);
  });
  return y;
}

/// The fp32 sum of dy's rows ([..., m] -> [m]).
at::Tensor bias_grad(const at::Tensor& dy_) {
  auto dy = dy_.contiguous();
  const int64_t m = dy.size(-1), rows = m ? dy.numel() / m : 0;
  const int64_t blocks = (rows + kBiasRows - 1) / kBiasRows;
  auto partial = at::zeros({std::max<int64_t>(blocks, 1), m}, dy.options().dtype(at::kFloat));
  const uint16_t* gp = bf16_bits(dy);
  float* acc = partial.data_ptr<float>();
  at::parallel_for(0, blocks, 1, [&](int64_t k0, int64_t k1) {
    for (int64_t k = k0; k < k1; ++k)
      for (int64_t r = k * kBiasRows; r < std::min(rows, (k + 1) * kBiasRows); ++r)
        sum_row(gp + r * m, acc + k * m, m);
  });
  for (int64_t k = 1; k < blocks; ++k)
    for (int64_t i = 0; i < m; ++i) acc[i] += acc[k * m + i];
  return partial[0].clone();
}

at::Tensor residual_forward(const at::Tensor& x, const at::Tensor& a) {
  auto y = at::empty_like(x, at::MemoryFormat::Contiguous);
  const int64_t n = x.numel();
  const float* xp = x.data_ptr<float>();
  const uint16_t* ap = bf16_bits(a);
  float* yp = y.data_ptr<float>();
  at::parallel_for(0, n, kGrain, [&](int64_t b, int64_t e) { residual_run(xp + b, ap + b, yp + b, e - b); });
  return y;
}

struct BiasAddFunction : torch::autograd::Function<BiasAddFunction> {
  static at::Tensor forward(torch::autograd::AutogradContext*, const at::Tensor& z, const at::Tensor& bias) {
    return bias_forward(z, bias);
  }
  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext*, torch::autograd::tensor_list grad) {
    // dy is the bf16 result's gradient; LibTorch's engine hands it over in bf16.
    auto dy = grad[0].scalar_type() == at::kBFloat16 ? grad[0] : grad[0].to(at::kBFloat16);
    return {dy, bias_grad(dy)};
  }
};

struct ResidualAddFunction : torch::autograd::Function<ResidualAddFunction> {
  static at::Tensor forward(torch::autograd::AutogradContext*, const at::Tensor& x, const at::Tensor& a) {
    return residual_forward(x, a);
  }
  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext*, torch::autograd::tensor_list grad) {
    return {grad[0], grad[0].to(at::kBFloat16)};
  }
};

bool on_cpu_contiguous(const at::Tensor& t) { return t.device().is_cpu() && t.is_contiguous(); }

}  // namespace

at::Tensor bias_add(const at::Tensor& z, const at::Tensor& bias) {
  if (z.scalar_type() != at::kBFloat16 || bias.scalar_type() != at::kFloat || bias.dim() != 1 || z.dim() < 1 ||
      bias.size(0) != z.size(-1) || !on_cpu_contiguous(z) || !on_cpu_contiguous(bias))
    return z + bias;
  const bool grad = torch::GradMode::is_enabled() && (z.requires_grad() || bias.requires_grad());
  return grad ? BiasAddFunction::apply(z, bias) : bias_forward(z, bias);
}

at::Tensor residual_add(const at::Tensor& x, const at::Tensor& a) {
  if (x.scalar_type() != at::kFloat || a.scalar_type() != at::kBFloat16 || !x.sizes().equals(a.sizes()) ||
      !on_cpu_contiguous(x) || !on_cpu_contiguous(a))
    return x + a;
  const bool grad = torch::GradMode::is_enabled() && (x.requires_grad() || a.requires_grad());
  return grad ? ResidualAddFunction::apply(x, a) : residual_forward(x, a);
}

}  // namespace vitkd
