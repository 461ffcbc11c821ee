#include "model/layer_norm.hpp"

#include <ATen/Parallel.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "model/clones.hpp"
#include "util/bf16.hpp"
#include "util/torch_compat.hpp"

namespace vitkd {
namespace {

// Row sums keep kLanes partial results, combined in a fixed order (GCC
// vectorises the lane loop; model/softmax.cpp does the same).
constexpr int64_t kLanes = 16;
constexpr int64_t kGrain = 32768;  // values per thread task (forward)
// The backward's gamma and beta gradients: rows summed in fixed blocks of
// kRows, the blocks' sums then added in block order.
constexpr int64_t kRows = 256;

VITKD_CLONES float row_sum(const float* x, int64_t n) {
  float lane[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int64_t j = 0; j < kLanes; ++j) lane[j] += x[i + j];
  float s = 0.0f;
  for (int64_t j = 0; j < kLanes; ++j) s += lane[j];
  for (; i < n; ++i) s += x[i];
  return s;
}

VITKD_CLONES float row_sq_dev(const float* x, float mean, int64_t n) {
  float lane[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int64_t j = 0; j < kLanes; ++j) {
      const float d = x[i + j] - mean;
      lane[j] += d * d;
    }
  float s = 0.0f;
  for (int64_t j = 0; j < kLanes; ++j) s += lane[j];
  for (; i < n; ++i) {
    const float d = x[i] - mean;
    s += d * d;
  }
  return s;
}

VITKD_CLONES void normalize_narrow(const float* x, float mean, float rstd, const float* g, const float* b,
                                   uint16_t* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = float_to_bf16((x[i] - mean) * rstd * g[i] + b[i]);
}

/// h = float(dy) * gamma, xhat = (x - mean) * rstd, and the row sums of h and
/// h * xhat; dgamma += float(dy) * xhat, dbeta += float(dy).
VITKD_CLONES void backward_prepare(const uint16_t* dy, const float* x, float mean, float rstd, const float* g,
                                   float* h, float* xhat, float* dg, float* db, float* sums, int64_t n) {
  float l1[kLanes] = {}, l2[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int64_t j = 0; j < kLanes; ++j) {
      const float d = bf16_to_float(dy[i + j]);
      const float xh = (x[i + j] - mean) * rstd;
      const float hh = d * g[i + j];
      h[i + j] = hh;
      xhat[i + j] = xh;
      dg[i + j] += d * xh;
      db[i + j] += d;
      l1[j] += hh;
      l2[j] += hh * xh;
    }
  float s1 = 0.0f, s2 = 0.0f;
  for (int64_t j = 0; j < kLanes; ++j) {
    s1 += l1[j];
    s2 += l2[j];
  }
  for (; i < n; ++i) {
    const float d = bf16_to_float(dy[i]);
    const float xh = (x[i] - mean) * rstd;
    const float hh = d * g[i];
    h[i] = hh;
    xhat[i] = xh;
    dg[i] += d * xh;
    db[i] += d;
    s1 += hh;
    s2 += hh * xh;
  }
  sums[0] = s1;
  sums[1] = s2;
}

/// dx = rstd * (h - mean(h) - xhat * mean(h * xhat)).
VITKD_CLONES void backward_dx(const float* h, const float* xhat, float rstd, float c1, float c2, float* dx,
                              int64_t n) {
  for (int64_t i = 0; i < n; ++i) dx[i] = rstd * (h[i] - c1 - xhat[i] * c2);
}

uint16_t* bits(const at::Tensor& t) { return reinterpret_cast<uint16_t*>(t.data_ptr<at::BFloat16>()); }

struct Forward {
  at::Tensor y, mean, rstd;  ///< bf16 [..., D]; fp32 [rows] each
};

Forward run_forward(const at::Tensor& x, const at::Tensor& gamma, const at::Tensor& beta, double eps) {
  const int64_t n = x.size(-1), rows = n ? x.numel() / n : 0;
  Forward f{at::empty(x.sizes(), x.options().dtype(at::kBFloat16)), at::empty({rows}, x.options()),
            at::empty({rows}, x.options())};
  const float *xp = x.data_ptr<float>(), *gp = gamma.data_ptr<float>(), *bp = beta.data_ptr<float>();
  float *mp = f.mean.data_ptr<float>(), *rp = f.rstd.data_ptr<float>();
  uint16_t* yp = bits(f.y);
  const float inv_n = 1.0f / static_cast<float>(n), e = static_cast<float>(eps);
  at::parallel_for(0, rows, std::max<int64_t>(1, kGrain / std::max<int64_t>(n, 1)), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const float* xr = xp + r * n;
      const float mean = row_sum(xr, n) * inv_n;
      const float rstd = 1.0f / std::sqrt(row_sq_dev(xr, mean, n) * inv_n + e);
      mp[r] = mean;
      rp[r] = rstd;
      normalize_narrow(xr, mean, rstd, gp, bp, yp + r * n, n);
    }
  });
  return f;
}

/// {dx fp32 [..., D], dgamma fp32 [D], dbeta fp32 [D]}.
std::vector<at::Tensor> run_backward(const at::Tensor& dy_, const at::Tensor& x, const at::Tensor& gamma,
                                     const at::Tensor& mean, const at::Tensor& rstd) {
  auto dy = dy_.to(at::kBFloat16).contiguous();
  const int64_t n = x.size(-1), rows = n ? x.numel() / n : 0;
  const int64_t blocks = (rows + kRows - 1) / kRows;
  auto dx = at::empty_like(x, at::MemoryFormat::Contiguous);
  auto partial = at::zeros({2, std::max<int64_t>(blocks, 1), n}, x.options());  // [dgamma, dbeta]
  const float *xp = x.data_ptr<float>(), *gp = gamma.data_ptr<float>();
  const float *mp = mean.data_ptr<float>(), *rp = rstd.data_ptr<float>();
  const uint16_t* dyp = bits(dy);
  float *dxp = dx.data_ptr<float>(), *dg = partial.data_ptr<float>(), *db = dg + std::max<int64_t>(blocks, 1) * n;
  const float inv_n = 1.0f / static_cast<float>(n);
  at::parallel_for(0, blocks, 1, [&](int64_t k0, int64_t k1) {
    std::vector<float> buf(2 * static_cast<size_t>(n));
    for (int64_t k = k0; k < k1; ++k)
      for (int64_t r = k * kRows; r < std::min(rows, (k + 1) * kRows); ++r) {
        float sums[2];
        backward_prepare(dyp + r * n, xp + r * n, mp[r], rp[r], gp, buf.data(), buf.data() + n, dg + k * n,
                         db + k * n, sums, n);
        backward_dx(buf.data(), buf.data() + n, rp[r], sums[0] * inv_n, sums[1] * inv_n, dxp + r * n, n);
      }
  });
  for (int64_t k = 1; k < blocks; ++k)
    for (int64_t i = 0; i < n; ++i) {
      dg[i] += dg[k * n + i];
      db[i] += db[k * n + i];
    }
  return {dx, partial[0][0].clone(), partial[1][0].clone()};
}

struct LayerNormBf16Function : torch::autograd::Function<LayerNormBf16Function> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x, const at::Tensor& gamma,
                            const at::Tensor& beta, double eps) {
    auto f = run_forward(x, gamma, beta, eps);
    ctx->save_for_backward({x, gamma, f.mean, f.rstd});
    return f.y;
  }
  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx,
                                               torch::autograd::tensor_list grad) {
    const auto s = ctx->get_saved_variables();
    auto g = run_backward(grad[0], s[0], s[1], s[2], s[3]);
    return {g[0], g[1], g[2], at::Tensor()};
  }
};

bool fp32_cpu_contiguous(const at::Tensor& t) {
  return t.defined() && t.scalar_type() == at::kFloat && t.device().is_cpu() && t.is_contiguous();
}

}  // namespace

at::Tensor layer_norm_bf16(const at::Tensor& x, const at::Tensor& gamma, const at::Tensor& beta, double eps) {
  TORCH_CHECK(fp32_cpu_contiguous(x) && fp32_cpu_contiguous(gamma) && fp32_cpu_contiguous(beta) && x.dim() >= 1 &&
                  gamma.dim() == 1 && gamma.sizes() == beta.sizes() && gamma.size(0) == x.size(-1),
              "layer_norm_bf16: x fp32 [..., D] and gamma, beta fp32 [D], contiguous on the CPU");
  const bool grad =
      torch::GradMode::is_enabled() && (x.requires_grad() || gamma.requires_grad() || beta.requires_grad());
  return grad ? LayerNormBf16Function::apply(x, gamma, beta, eps) : run_forward(x, gamma, beta, eps).y;
}

at::Tensor norm_for_products(torch::nn::LayerNorm norm, const at::Tensor& x) {
  const auto& o = norm->options;
  if (!cpu_autocast_bf16() || !fp32_cpu_contiguous(x) || !o.elementwise_affine() ||
      o.normalized_shape().size() != 1 || x.dim() < 1 || !fp32_cpu_contiguous(norm->weight) ||
      !fp32_cpu_contiguous(norm->bias))
    return norm(x);
  return layer_norm_bf16(x, norm->weight, norm->bias, o.eps());
}

}  // namespace vitkd
