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

// Each row is widened into an fp32 buffer padded to a whole number of
// kLanes-wide blocks, so that every pass over it is whole vectors with no
// remainder loop (the padding holds -inf for the forward, whose exponentials
// are 0, and 0 for the backward). Reductions keep kLanes partial
// results and combine them in a fixed tree (8 + 8, 4 + 4, 2 + 2, 1 + 1), so
// the rounding does not depend on the thread count. A whole block of rows
// runs inside one cloned function, so that its constants are loaded once per
// block, not once per row: at the attention's 197 tokens a row is 13 vectors,
// and per-row calls, set-up and serial 16-term sums took a fifth of the
// forward's time (at [192, 197, 197] 9.3 ms before, 7.1 ms after on an AMX
// Xeon; experiments/performance-log.md, 2026-12-07). (The AVX2 and
// AVX-512 clones contract products and sums into FMAs, the baseline one does
// not: the last bits may differ between a node with FMA and one without.)
constexpr int64_t kLanes = 16;

int64_t padded(int64_t n) { return (n + kLanes - 1) / kLanes * kLanes; }

inline float tree_sum(float* lane) {
  for (int64_t w = kLanes / 2; w > 0; w /= 2)
    for (int64_t j = 0; j < w; ++j) lane[j] += lane[j + w];
  return lane[0];
}

inline float tree_max(float* lane) {
  for (int64_t w = kLanes / 2; w > 0; w /= 2)
    for (int64_t j = 0; j < w; ++j) lane[j] = std::max(lane[j], lane[j + w]);
  return lane[0];
}

/// f[0, np) = x[0, n) widened, then `pad` up to np.
inline void widen_padded(const uint16_t* x, float* f, int64_t n, int64_t np, float pad) {
  for (int64_t i = 0; i < n; ++i) f[i] = bf16_to_float(x[i]);
  for (int64_t i = n; i < np; ++i) f[i] = pad;
}

/// Rows [r0, r1) of length n: y = softmax(x). f holds padded(n) floats.
VITKD_CLONES void forward_rows(const uint16_t* x, uint16_t* y, float* f, int64_t n, int64_t r0, int64_t r1) {
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  const int64_t np = padded(n);
  for (int64_t r = r0; r < r1; ++r) {
    widen_padded(x + r * n, f, n, np, kNegInf);
    float lane[kLanes];
    for (int64_t j = 0; j < kLanes; ++j) lane[j] = kNegInf;
    for (int64_t i = 0; i < np; i += kLanes)
      for (int64_t j = 0; j < kLanes; ++j) lane[j] = std::max(lane[j], f[i + j]);
    const float m = tree_max(lane);
    for (int64_t j = 0; j < kLanes; ++j) lane[j] = 0.0f;
    for (int64_t i = 0; i < np; i += kLanes)
      for (int64_t j = 0; j < kLanes; ++j) {
        // A score more than 87 below the row's maximum (the padding's -inf
        // among them) gets exactly 0: its exponential is below fp32's
        // smallest normal, where fast_exp would return that floor.
        const float t = f[i + j] - m;
        const float e = t < -87.0f ? 0.0f : fast_exp(t);
        f[i + j] = e;
        lane[j] += e;
      }
    const float inv = 1.0f / tree_sum(lane);
    uint16_t* yr = y + r * n;
    for (int64_t i = 0; i < n; ++i) yr[i] = float_to_bf16(f[i] * inv);
  }
}

/// Rows [r0, r1): dx = y * (dy - sum(dy * y)). f holds 2 padded(n) floats.
VITKD_CLONES void backward_rows(const uint16_t* y, const uint16_t* dy, uint16_t* dx, float* f, int64_t n,
                                int64_t r0, int64_t r1) {
  const int64_t np = padded(n);
  float* yf = f;
  float* gf = f + np;
  for (int64_t r = r0; r < r1; ++r) {
    widen_padded(y + r * n, yf, n, np, 0.0f);
    widen_padded(dy + r * n, gf, n, np, 0.0f);
    float lane[kLanes] = {};
    for (int64_t i = 0; i < np; i += kLanes)
      for (int64_t j = 0; j < kLanes; ++j) lane[j] += yf[i + j] * gf[i + j];
    const float d = tree_sum(lane);
    uint16_t* dxr = dx + r * n;
    for (int64_t i = 0; i < n; ++i) dxr[i] = float_to_bf16(yf[i] * (gf[i] - d));
  }
}

constexpr int64_t kGrain = 32768;  // values per thread task

/// Runs kernel(r0, r1, scratch) over blocks of the rows of length n, with a
/// scratch buffer of 2 padded(n) floats per task.
template <typename F>
void for_rows(int64_t rows, int64_t n, F kernel) {
  at::parallel_for(0, rows, std::max<int64_t>(1, kGrain / std::max<int64_t>(n, 1)), [&](int64_t r0, int64_t r1) {
    std::vector<float> buf(2 * static_cast<size_t>(padded(n)));
    kernel(r0, r1, buf.data());
  });
}

at::Tensor run_forward(const at::Tensor& x) {
  auto y = at::empty_like(x, at::MemoryFormat::Contiguous);
  const int64_t n = x.size(-1), rows = n ? x.numel() / n : 0;
  const uint16_t* xp = bf16_bits(x);
  uint16_t* yp = bf16_bits(y);
  for_rows(rows, n, [&](int64_t r0, int64_t r1, float* buf) { forward_rows(xp, yp, buf, n, r0, r1); });
  return y;
}

at::Tensor run_backward(const at::Tensor& dy_, const at::Tensor& y) {
  auto dy = dy_.to(at::kBFloat16).contiguous();
  auto dx = at::empty_like(y, at::MemoryFormat::Contiguous);
  const int64_t n = y.size(-1), rows = n ? y.numel() / n : 0;
  const uint16_t *yp = bf16_bits(y), *gp = bf16_bits(dy);
  uint16_t* dp = bf16_bits(dx);
  for_rows(rows, n, [&](int64_t r0, int64_t r1, float* buf) { backward_rows(yp, gp, dp, buf, n, r0, r1); });
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
void forward(const uint16_t* x, uint16_t* y, int64_t n) {
  std::vector<float> buf(static_cast<size_t>(padded(n)));
  forward_rows(x, y, buf.data(), n, 0, 1);
}
void backward(const uint16_t* y, const uint16_t* dy, uint16_t* dx, int64_t n) {
  std::vector<float> buf(2 * static_cast<size_t>(padded(n)));
  backward_rows(y, dy, dx, buf.data(), n, 0, 1);
}
}  // namespace softmax_kernel

}  // namespace vitkd
