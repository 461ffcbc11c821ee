#include "model/gelu.hpp"

#include <ATen/Parallel.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>
#include <utility>

#include "model/clones.hpp"
#include "model/fast_exp.hpp"
#include "util/bf16.hpp"

namespace vitkd {
namespace {

// erf(z) ~ z P(z^2) / Q(z^2) for 0 <= z <= 4, a (5, 5) rational fit of our own
// (iteratively reweighted least squares on [0, 4]); max error 3.3e-8 in double.
// Beyond 4, erf(z) = 1 to within 1.6e-8.
constexpr float kP0 = 1.1283790510966971f, kP1 = 0.19365658035856143f,
                kP2 = 0.05313367937115182f, kP3 = 0.0038950662523679017f,
                kP4 = 0.00028602284420731097f, kP5 = 2.000066783670094e-06f;
constexpr float kQ1 = 0.5049555395379354f, kQ2 = 0.11541278021326197f,
                kQ3 = 0.015226651616916737f, kQ4 = 0.0011908288515104855f,
                kQ5 = 3.763748388901871e-05f;
constexpr float kInvSqrt2 = 0.70710678118654752f;
constexpr float kInvSqrt2Pi = 0.39894228040143268f;

/// Phi(x) = (1 + erf(x / sqrt 2)) / 2. Branch-free, so the loops vectorise.
inline float normal_cdf(float x) {
  const float z = x * kInvSqrt2;
  const float a = std::min(std::fabs(z), 4.0f);
  const float a2 = a * a;
  const float p = ((((kP5 * a2 + kP4) * a2 + kP3) * a2 + kP2) * a2 + kP1) * a2 + kP0;
  const float q = ((((kQ5 * a2 + kQ4) * a2 + kQ3) * a2 + kQ2) * a2 + kQ1) * a2 + 1.0f;
  const float e = a * p / q;
  return 0.5f + 0.5f * std::copysign(e, z);
}

/// exp(-x^2 / 2) (model/fast_exp.hpp).
inline float exp_neg_half_square(float x) { return fast_exp(-0.5f * x * x); }

inline float gelu_grad(float x) { return normal_cdf(x) + x * kInvSqrt2Pi * exp_neg_half_square(x); }

constexpr int64_t kChunk = 512;  // values converted to fp32 at a time (2 KiB per array)

VITKD_CLONES void forward_f32(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] * normal_cdf(x[i]);
}

VITKD_CLONES void backward_f32(const float* dy, const float* x, float* dx, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dx[i] = dy[i] * gelu_grad(x[i]);
}

// bf16: widen a chunk to fp32, run the fp32 kernel on it, narrow it back;
// three simple loops that GCC vectorises separately.
VITKD_CLONES void forward_bf16(const uint16_t* x, uint16_t* y, int64_t n) {
  float xf[kChunk], yf[kChunk];
  for (int64_t b = 0; b < n; b += kChunk) {
    const int64_t m = std::min(kChunk, n - b);
    for (int64_t i = 0; i < m; ++i) xf[i] = bf16_to_float(x[b + i]);
    for (int64_t i = 0; i < m; ++i) yf[i] = xf[i] * normal_cdf(xf[i]);
    for (int64_t i = 0; i < m; ++i) y[b + i] = float_to_bf16(yf[i]);
  }
}

VITKD_CLONES void backward_bf16(const uint16_t* dy, const uint16_t* x, uint16_t* dx, int64_t n) {
  float xf[kChunk], gf[kChunk];
  for (int64_t b = 0; b < n; b += kChunk) {
    const int64_t m = std::min(kChunk, n - b);
    for (int64_t i = 0; i < m; ++i) xf[i] = bf16_to_float(x[b + i]);
    for (int64_t i = 0; i < m; ++i) gf[i] = bf16_to_float(dy[b + i]);
    for (int64_t i = 0; i < m; ++i) gf[i] *= gelu_grad(xf[i]);
    for (int64_t i = 0; i < m; ++i) dx[b + i] = float_to_bf16(gf[i]);
  }
}

// Bias variants: one row of m values at a time, bias b (fp32) added in fp32.
VITKD_CLONES void bias_forward_f32(const float* z, const float* b, float* y, int64_t m) {
  for (int64_t i = 0; i < m; ++i) {
    const float t = z[i] + b[i];
    y[i] = t * normal_cdf(t);
  }
}

/// dz = dy * gelu'(z + b); acc += dz (the bias gradient's partial sum).
VITKD_CLONES void bias_backward_f32(const float* dy, const float* z, const float* b, float* dz,
                                    float* acc, int64_t m) {
  for (int64_t i = 0; i < m; ++i) {
    const float g = dy[i] * gelu_grad(z[i] + b[i]);
    dz[i] = g;
    acc[i] += g;
  }
}

VITKD_CLONES void bias_forward_bf16(const uint16_t* z, const float* b, uint16_t* y, int64_t m) {
  float zf[kChunk], yf[kChunk];
  for (int64_t c = 0; c < m; c += kChunk) {
    const int64_t k = std::min(kChunk, m - c);
    for (int64_t i = 0; i < k; ++i) zf[i] = bf16_to_float(z[c + i]) + b[c + i];
    for (int64_t i = 0; i < k; ++i) yf[i] = zf[i] * normal_cdf(zf[i]);
    for (int64_t i = 0; i < k; ++i) y[c + i] = float_to_bf16(yf[i]);
  }
}

VITKD_CLONES void bias_backward_bf16(const uint16_t* dy, const uint16_t* z, const float* b,
                                     uint16_t* dz, float* acc, int64_t m) {
  float zf[kChunk], gf[kChunk];
  for (int64_t c = 0; c < m; c += kChunk) {
    const int64_t k = std::min(kChunk, m - c);
    for (int64_t i = 0; i < k; ++i) zf[i] = bf16_to_float(z[c + i]) + b[c + i];
    for (int64_t i = 0; i < k; ++i) gf[i] = bf16_to_float(dy[c + i]);
    for (int64_t i = 0; i < k; ++i) gf[i] *= gelu_grad(zf[i]);
    for (int64_t i = 0; i < k; ++i) dz[c + i] = float_to_bf16(gf[i]);
    for (int64_t i = 0; i < k; ++i) acc[c + i] += gf[i];
  }
}

constexpr int64_t kGrain = 32768;  // values per thread task

bool supported(const at::Tensor& t) {
  return t.scalar_type() == at::kFloat || t.scalar_type() == at::kBFloat16;
}

at::Tensor run_forward(const at::Tensor& x_) {
  auto x = x_.contiguous();
  auto y = at::empty_like(x, at::MemoryFormat::Contiguous);
  const int64_t n = x.numel();
  if (x.scalar_type() == at::kFloat) {
    const float* xp = x.data_ptr<float>();
    float* yp = y.data_ptr<float>();
    at::parallel_for(0, n, kGrain, [&](int64_t b, int64_t e) { forward_f32(xp + b, yp + b, e - b); });
  } else {
    const uint16_t* xp = bf16_bits(x);
    uint16_t* yp = bf16_bits(y);
    at::parallel_for(0, n, kGrain, [&](int64_t b, int64_t e) { forward_bf16(xp + b, yp + b, e - b); });
  }
  return y;
}

at::Tensor run_backward(const at::Tensor& dy_, const at::Tensor& x) {
  auto dy = dy_.to(x.scalar_type()).contiguous();
  auto dx = at::empty_like(x, at::MemoryFormat::Contiguous);
  const int64_t n = x.numel();
  if (x.scalar_type() == at::kFloat) {
    const float *gp = dy.data_ptr<float>(), *xp = x.data_ptr<float>();
    float* dp = dx.data_ptr<float>();
    at::parallel_for(0, n, kGrain,
                     [&](int64_t b, int64_t e) { backward_f32(gp + b, xp + b, dp + b, e - b); });
  } else {
    const uint16_t *gp = bf16_bits(dy), *xp = bf16_bits(x);
    uint16_t* dp = bf16_bits(dx);
    at::parallel_for(0, n, kGrain,
                     [&](int64_t b, int64_t e) { backward_bf16(gp + b, xp + b, dp + b, e - b); });
  }
  return dx;
}

// Rows are split into fixed blocks of kBiasRows; each block sums its part of
// the bias gradient, and the blocks' sums are added in block order, so the
// result does not depend on the thread count.
constexpr int64_t kBiasRows = 256;

template <typename T>
T* ptr(const at::Tensor& t) {
  if constexpr (std::is_same_v<T, uint16_t>)
    return bf16_bits(t);
  else
    return t.data_ptr<float>();
}

at::Tensor run_bias_forward(const at::Tensor& z, const at::Tensor& bias_f32) {
  auto y = at::empty_like(z, at::MemoryFormat::Contiguous);
  const int64_t m = z.size(-1), rows = m ? z.numel() / m : 0;
  const float* bp = bias_f32.data_ptr<float>();
  auto rows_fn = [&](auto* zp, auto* yp, auto kernel) {
    at::parallel_for(0, rows, std::max<int64_t>(1, kGrain / std::max<int64_t>(m, 1)),
                     [&](int64_t r0, int64_t r1) {
                       for (int64_t r = r0; r < r1; ++r) kernel(zp + r * m, bp, yp + r * m, m);
                     });
  };
  if (z.scalar_type() == at::kFloat)
    rows_fn(ptr<float>(z), ptr<float>(y), bias_forward_f32);
  else
    rows_fn(ptr<uint16_t>(z), ptr<uint16_t>(y), bias_forward_bf16);
  return y;
}

/// Returns {dz, dbias (fp32 [m])}.
std::pair<at::Tensor, at::Tensor> run_bias_backward(const at::Tensor& dy_, const at::Tensor& z,
                                                    const at::Tensor& bias_f32) {
  auto dy = dy_.to(z.scalar_type()).contiguous();
  auto dz = at::empty_like(z, at::MemoryFormat::Contiguous);
  const int64_t m = z.size(-1), rows = m ? z.numel() / m : 0;
  const int64_t blocks = (rows + kBiasRows - 1) / kBiasRows;
  auto partial = at::zeros({std::max<int64_t>(blocks, 1), m}, z.options().dtype(at::kFloat));
  const float* bp = bias_f32.data_ptr<float>();
  float* acc = partial.data_ptr<float>();
  auto blocks_fn = [&](auto* gp, auto* zp, auto* dp, auto kernel) {
    at::parallel_for(0, blocks, 1, [&](int64_t k0, int64_t k1) {
      for (int64_t k = k0; k < k1; ++k)
        for (int64_t r = k * kBiasRows; r < std::min(rows, (k + 1) * kBiasRows); ++r)
          kernel(gp + r * m, zp + r * m, bp, dp + r * m, acc + k * m, m);
    });
  };
  if (z.scalar_type() == at::kFloat)
    blocks_fn(ptr<float>(dy), ptr<float>(z), ptr<float>(dz), bias_backward_f32);
  else
    blocks_fn(ptr<uint16_t>(dy), ptr<uint16_t>(z), ptr<uint16_t>(dz), bias_backward_bf16);
  for (int64_t k = 1; k < blocks; ++k)
    for (int64_t i = 0; i < m; ++i) acc[i] += acc[k * m + i];
  return {dz, partial[0].clone()};
}

struct BiasGeluFunction : torch::autograd::Function<BiasGeluFunction> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& z,
                            const at::Tensor& bias) {
    auto zc = z.contiguous();
    auto bf = bias.to(at::kFloat).contiguous();
    ctx->save_for_backward({zc, bf});
    ctx->saved_data["bias_dtype"] = static_cast<int64_t>(bias.scalar_type());
    return run_bias_forward(zc, bf);
  }
  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx,
                                               torch::autograd::tensor_list grad) {
    const auto saved = ctx->get_saved_variables();
    auto [dz, db] = run_bias_backward(grad[0], saved[0], saved[1]);
    const auto bias_dtype = static_cast<at::ScalarType>(ctx->saved_data["bias_dtype"].toInt());
    return {dz, db.to(bias_dtype)};
  }
};

struct GeluFunction : torch::autograd::Function<GeluFunction> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x) {
    auto xc = x.contiguous();
    ctx->save_for_backward({xc});
    return run_forward(xc);
  }
  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx,
                                               torch::autograd::tensor_list grad) {
    const auto saved = ctx->get_saved_variables();
    return {run_backward(grad[0], saved[0])};
  }
};

}  // namespace

at::Tensor gelu(const at::Tensor& x) {
  if (!supported(x) || !x.device().is_cpu()) return torch::gelu(x);
  if (!x.requires_grad() || !torch::GradMode::is_enabled()) return run_forward(x);
  return GeluFunction::apply(x);
}

at::Tensor bias_gelu_tensor(const at::Tensor& z, const at::Tensor& bias) {
  // The bias in z's dtype: an fp32 bias would promote the sum (the widest
  // activation, [B*T, 4D]) and everything autograd saves of it to fp32.
  return torch::gelu(z + bias.to(z.scalar_type()));
}

at::Tensor bias_gelu(const at::Tensor& z, const at::Tensor& bias) {
  const bool fits = supported(z) && supported(bias) && z.device().is_cpu() && bias.device().is_cpu() &&
                    z.dim() >= 1 && bias.dim() == 1 && bias.size(0) == z.size(-1);
  if (!fits) return bias_gelu_tensor(z, bias);
  const bool grad = torch::GradMode::is_enabled() && (z.requires_grad() || bias.requires_grad());
  if (!grad) return run_bias_forward(z.contiguous(), bias.to(at::kFloat).contiguous());
  return BiasGeluFunction::apply(z, bias);
}

namespace gelu_kernel {
void forward(const float* x, float* y, int64_t n) { forward_f32(x, y, n); }
void backward(const float* dy, const float* x, float* dx, int64_t n) { backward_f32(dy, x, dx, n); }
}  // namespace gelu_kernel

}  // namespace vitkd
