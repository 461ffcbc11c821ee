#pragma once
// Version-specific LibTorch calls live here and nowhere else.
// Supports LibTorch 1.13 (Debian 12) and 2.x (clusters, Spack's py-torch).
#include <ATen/autocast_mode.h>
#include <torch/torch.h>
#include <torch/version.h>

#include <string>
#include <utility>

#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
#define VITKD_TORCH_AUTOCAST_BY_DEVICE 1  // at::autocast::*(DeviceType) (2.4+)
#endif
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 1)
#define VITKD_TORCH_SDPA 1  // at::scaled_dot_product_attention with a scale argument (2.1+)
#endif
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
#define VITKD_TORCH_FUSED_ADAMW 1  // at::_fused_adamw_ on CPU and CUDA, with grad_scale and found_inf (2.4+)
#endif

namespace vitkd {

/// The LibTorch this binary was built against, "MAJOR.MINOR.PATCH" (result.json's `libtorch`).
inline std::string libtorch_version() {
  return std::to_string(TORCH_VERSION_MAJOR) + "." + std::to_string(TORCH_VERSION_MINOR) + "." +
         std::to_string(TORCH_VERSION_PATCH);
}

/// Enables autocast to bfloat16 on `device` (CPU or CUDA) for its scope
/// (matrix products run in bf16, numerically sensitive ops in fp32) and
/// clears the cast cache when the outermost region ends. `enabled` = false
/// makes it a no-op.
class AutocastBf16 {
 public:
  explicit AutocastBf16(bool enabled, torch::DeviceType device = torch::kCPU)
      : enabled_(enabled), cuda_(device == torch::kCUDA) {
    if (!enabled_) return;
    prev_enabled_ = is_enabled();
    prev_dtype_ = dtype();
    set(true, at::kBFloat16);
    at::autocast::increment_nesting();
  }
  ~AutocastBf16() {
    if (!enabled_) return;
    if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
    set(prev_enabled_, prev_dtype_);
  }
  AutocastBf16(const AutocastBf16&) = delete;
  AutocastBf16& operator=(const AutocastBf16&) = delete;

 private:
#ifdef VITKD_TORCH_AUTOCAST_BY_DEVICE
  at::DeviceType type() const { return cuda_ ? at::kCUDA : at::kCPU; }
  bool is_enabled() const { return at::autocast::is_autocast_enabled(type()); }
  at::ScalarType dtype() const { return at::autocast::get_autocast_dtype(type()); }
  void set(bool on, at::ScalarType t) const {
    at::autocast::set_autocast_dtype(type(), t);
    at::autocast::set_autocast_enabled(type(), on);
  }
#else
  bool is_enabled() const { return cuda_ ? at::autocast::is_enabled() : at::autocast::is_cpu_enabled(); }
  at::ScalarType dtype() const {
    return cuda_ ? at::autocast::get_autocast_gpu_dtype() : at::autocast::get_autocast_cpu_dtype();
  }
  void set(bool on, at::ScalarType t) const {
    if (cuda_) {
      at::autocast::set_autocast_gpu_dtype(t);
      at::autocast::set_enabled(on);
    } else {
      at::autocast::set_autocast_cpu_dtype(t);
      at::autocast::set_cpu_enabled(on);
    }
  }
#endif
  bool enabled_, cuda_;
  bool prev_enabled_ = false;
  at::ScalarType prev_dtype_ = at::kBFloat16;
};

/// A parameter's gradient accumulator, as torch::autograd::impl::grad_accumulator
/// returns it: std::shared_ptr<Node> in 1.13, c10::intrusive_ptr<Node> in 2.x.
using GradAccumulatorPtr =
    decltype(torch::autograd::impl::grad_accumulator(std::declval<const torch::Tensor&>()));

/// Whether this LibTorch has a fused attention kernel (scaled_dot_product_attention).
constexpr bool has_fused_attention() {
#ifdef VITKD_TORCH_SDPA
  return true;
#else
  return false;
#endif
}

/// softmax(q k^T * scale) v through LibTorch's fused attention, for q [B, H,
/// Q, hd], k and v [B, H, T, hd]. Only where has_fused_attention(); callers
/// keep their own kernels otherwise.
inline torch::Tensor fused_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                     double scale) {
#ifdef VITKD_TORCH_SDPA
  return at::scaled_dot_product_attention(q, k, v, /*attn_mask=*/{}, /*dropout_p=*/0.0, /*is_causal=*/false,
                                          scale);
#else
  (void)k;
  (void)v;
  (void)scale;
  TORCH_CHECK(false, "fused attention needs LibTorch 2.1 or newer");
  return q;
#endif
}

/// Whether this LibTorch has the fused AdamW kernel (at::_fused_adamw_).
constexpr bool has_fused_adamw() {
#ifdef VITKD_TORCH_FUSED_ADAMW
  return true;
#else
  return false;
#endif
}

/// One AdamW step of tensors p, g, m, v (lists of equal length; `steps`: the
/// float32 update count of each, read for bias correction and not changed)
/// through LibTorch's fused kernel: one pass over memory. The gradients are
/// divided by `grad_scale` (0-dim float32); with `found_inf` (0-dim float32)
/// equal to 1 nothing changes. Only where has_fused_adamw().
inline void fused_adamw(at::TensorList p, at::TensorList g, at::TensorList m, at::TensorList v,
                        at::TensorList steps, double lr, double beta1, double beta2, double weight_decay,
                        double eps, const torch::Tensor& grad_scale, const torch::Tensor& found_inf) {
#ifdef VITKD_TORCH_FUSED_ADAMW
  at::_fused_adamw_(p, g, m, v, /*max_exp_avg_sqs=*/{}, steps, lr, beta1, beta2, weight_decay, eps,
                    /*amsgrad=*/false, /*maximize=*/false, grad_scale, found_inf);
#else
  (void)p, (void)g, (void)m, (void)v, (void)steps, (void)lr, (void)beta1, (void)beta2, (void)weight_decay,
      (void)eps, (void)grad_scale, (void)found_inf;
  TORCH_CHECK(false, "the fused AdamW kernel needs LibTorch 2.4 or newer");
#endif
}

}  // namespace vitkd
