#pragma once
// Fused AdamW over one shard of the flat buffers, as Kokkos kernels over the
// tensors' memory (unmanaged views, no copies). The moments m and v exist for
// the shard only (ZeRO stage 1).
#include <cstdint>
#include <memory>

#include "optim/flat_params.hpp"

namespace vitkd {

struct AdamWHyper {
  double lr = 1e-3;
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
  double weight_decay = 0.05;  ///< decoupled: p -= lr * wd * p where the mask is 1
};

class AdamW {
 public:
  explicit AdamW(Shard shard);
  ~AdamW();
  AdamW(const AdamW&) = delete;
  AdamW& operator=(const AdamW&) = delete;

  /// Sum of squares of `grad` over the shard ("AdamW::grad_sq_norm").
  double grad_sq_norm(const float* grad) const;
  /// One update ("AdamW::step"). `param`, `grad`, `mask` point at the
  /// shard's first element; gradients are multiplied by `grad_scale` first
  /// (clipping). Increments the step count used for bias correction.
  void step(float* param, const float* grad, const float* mask, float grad_scale,
            const AdamWHyper& h);

  const Shard& shard() const { return shard_; }
  int64_t steps() const { return steps_; }
  void set_steps(int64_t s) { steps_ = s; }
  float* m();  ///< first moment [shard.size]
  float* v();  ///< second moment [shard.size]
  /// Bytes of optimizer state held by this rank (m and v).
  int64_t state_bytes() const { return 2 * shard_.size * static_cast<int64_t>(sizeof(float)); }

 private:
  struct State;
  Shard shard_;
  int64_t steps_ = 0;
  std::unique_ptr<State> st_;
};

/// lr at a point of training measured in samples seen: linear warm-up over
/// `warmup` samples, then cosine decay from `peak` to `floor` at `total`.
double schedule_lr(double samples_seen, double warmup, double total, double peak, double floor);

}  // namespace vitkd
