#include "model/softmax.hpp"

#include <ATen/Parallel.h>
#include <torch/torch.h>

#include <algorithm>
#include <limits>
#include <vector>

#include "model/clones.hpp"
#include "model/fast_exp.hpp"
#include "util/bf16.hpp"

namespace vitkd {
namespace {

// Reductions over a row keep kLanes partial results, combined in a fixed
// order at the end: GCC vectorises the lane loop, and the order (so the
// rounding) does not depend on the thread count. (The AVX2 and AVX-512
// clones contract products and sums into FMAs, the baseline one does not:
// the last bits may differ between a node with FMA and one without.)
constexpr int64_t kLanes = 16;

VITKD_CLONES void widen(const uint16_t* x, float* f, int64_t n) {
  for (int64_t i = 0; i < n; ++i) f[i] = bf16_to_float(x[i]);
}

VITKD_CLONES float row_max(const float* f, int64_t n) {
  float lane[kLanes];
  for (int64_t j = 0; j < kLanes; ++j) lane[j] = -std::numeric_limits<float>::infinity();
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int64_t j = 0; j < kLanes; ++j) lane[j] = std::max(lane[j], f[i + j]);
  float m = -std::numeric_limits<float>::infinity();
  for (int64_t j = 0; j < kLanes; ++j) m = std::max(m, lane[j]);
  for (; i < n; ++i) m = std::max(m, f[i]);
  return m;
}

/// f[i] = exp(f[i] - m); returns the sum of the new f.
VITKD_CLONES float exp_and_sum(float* f, float m, int64_t n) {
  float lane[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int64_t j = 0; j < kLanes; ++j) {
      f[i + j] = fast_exp(f[i + j] - m);
      lane[j] += f[i + j];
    }
  float s = 0.0f;
  for (int64_t j = 0; j < kLanes; ++j) s += lane[j];
  for (; i < n; ++i) {
    f[i] = fast_exp(f[i] - m);
    s += f[i];
  }
  return s;
}

VITKD_CLONES void scale_narrow(const float* f, float r, uint16_t* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = float_to_bf16(f[i] * r);
}

VITKD_CLONES float dot(const float* a, const float* b, int64_t n) {
  float lane[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int64_t j = 0; j < kLanes; ++j) lane[j] += a[i + j] * b[i + j];
  float s = 0.0f;
  for (int64_t j = 0; j < kLanes; ++j) s += lane[j];
  for (; i < n; ++i) s += a[i] * b[i];
  return s;
}

/// dx = y * (dy - d), narrowed.
VITKD_CLONES void grad_narrow(const float* y, const float* dy, float d, uint16_t* dx, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dx[i] = float_to_bf16(y[i] * (dy[i] - d));
}

void forward_row(const uint16_t* x, uint16_t* y, float* buf, int64_t n) {
  widen(x, buf, n);
  const float m = row_max(buf, n);
  const float s = exp_and_sum(buf, m, n);
  scale_narrow(buf, 1.0f / s, y, n);
}

void backward_row(const uint16_t* y, const uint16_t* dy, uint16_t* dx, float* buf, int64_t n) {
  float* yf = buf;
  float* gf = buf + n;
  widen(y, yf, n);
  widen(dy, gf, n);
  grad_narrow(yf, gf, dot(yf, gf, n), dx, n);
}

constexpr int64_t kGrain = 32768;  // values per thread task

/// Runs kernel(row r) over the rows of length n of `rows` x n values, with a
/// scratch buffer of 2n floats per task.
template <typename F>
void for_rows(int64_t rows, int64_t n, F kernel) {
  at::parallel_for(0, rows, std::max<int64_t>(1, kGrain / std::max<int64_t>(n, 1)), [&](int64_t r0, int64_t r1) {
    std::vector<float> buf(2 * static_cast<size_t>(n));
    for (int64_t r = r0; r < r1; ++r) kernel(r, buf.data());
  });
}

at::Tensor run_forward(const at::Tensor& x) {
  auto y = at::empty_like(x, at::MemoryFormat::Contiguous);
  const int64_t n = x.size(-1), rows = n ? x.numel() / n : 0;
  const uint16_t* xp = bf16_bits(x);
  uint16_t* yp = bf16_bits(y);
  for_rows(rows, n, [&](int64_t r, float* buf) { forward_row(xp + r * n, yp + r * n, buf, n); });
  return y;
}

at::Tensor run_backward(const at::Tensor& dy_, const at::Tensor& y) {
  auto dy = dy_.to(at::kBFloat16).contiguous();
  auto dx = at::empty_like(y, at::MemoryFormat::Contiguous);
  const int64_t n = y.size(-1), rows = n ? y.numel() / n : 0;
  const uint16_t *yp = bf16_bits(y), *gp = bf16_bits(dy);
  uint16_t* dp = bf16_bits(dx);
  for_rows(rows, n, [&](int64_t r, float* buf) { backward_row(yp + r * n, gp + r * n, dp + r * n, buf, n); });
  return dx;
}

struct SoftmaxFunction : torch::autograd::Function<SoftmaxFunction> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x) {
    auto y = run_forward(x.contiguous());
    ctx->save_for_backward({y});
    return y;
  }
  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx,
                                               torch::autograd::tensor_list grad) {
    const auto saved = ctx->get_saved_variables();
    return {run_backward(grad[0], saved[0])};
  }
};

}  // namespace

at::Tensor softmax_lastdim(const at::Tensor& x) {
  if (x.scalar_type() != at::kBFloat16 || !x.device().is_cpu() || x.dim() == 0 || x.numel() == 0)
    return x.softmax(-1);
  if (!x.requires_grad() || !torch::GradMode::is_enabled()) return run_forward(x.contiguous());
  return SoftmaxFunction::apply(x);
}

namespace softmax_kernel {
void forward(const uint16_t* x, uint16_t* y, float* buf, int64_t n) { forward_row(x, y, buf, n); }
void backward(const uint16_t* y, const uint16_t* dy, uint16_t* dx, float* buf, int64_t n) {
  backward_row(y, dy, dx, buf, n);
}
}  // namespace softmax_kernel

}  // namespace vitkd
