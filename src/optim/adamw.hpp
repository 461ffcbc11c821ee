#pragma once
// Fused AdamW over one shard of the flat buffers. The moments m and v exist
// for the shard only (ZeRO stage 1) and live on the buffers' device.
//
// Two implementations of the same update, chosen by where the memory is:
//  * host memory: one Kokkos kernel over the tensors' memory (unmanaged
//    views, no copies; "AdamW::step", "AdamW::grad_sq_norm");
//  * device memory: LibTorch's element-wise kernels on the compute stream,
//    the same arithmetic in the same order. A Kokkos install with a device
//    backend (Kokkos CUDA) is not required for it.
// AdamWKernel::Tensor forces the second on the CPU too, which is how the
// tests compare the device arithmetic with the host kernel.
#include <torch/torch.h>

#include <cstdint>
#include <memory>

#include "optim/flat_params.hpp"

namespace vitkd {

struct AdamWHyper {
  double lr = 1e-3;
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
  double weight_decay = 0.05;  ///< decoupled: p -= lr * wd * p where the mask is 1
};

/// Which implementation runs the update (see the file comment).
enum class AdamWKernel {
  Auto,    ///< Kokkos on host memory, tensor kernels on a device
  Kokkos,  ///< the Kokkos host kernel (host memory only)
  Tensor,  ///< LibTorch element-wise kernels (any device)
};

class AdamW {
 public:
  /// Moments for `shard`, zero, on `device`.
  explicit AdamW(Shard shard, torch::Device device = torch::kCPU, AdamWKernel kernel = AdamWKernel::Auto);
  ~AdamW();
  AdamW(const AdamW&) = delete;
  AdamW& operator=(const AdamW&) = delete;

  /// Sum of squares of `grad` ([shard.size] float32 on the device), in
  /// double. Reading it waits for the device.
  double grad_sq_norm(const torch::Tensor& grad) const;
  /// One update. `param`, `grad`, `mask`: [shard.size] float32 on the
  /// device (the shard's part of the flat buffers); gradients are multiplied
  /// by `grad_scale` first (clipping). Increments the step count used for
  /// bias correction.
  void step(torch::Tensor param, const torch::Tensor& grad, const torch::Tensor& mask, float grad_scale,
            const AdamWHyper& h);

  const Shard& shard() const { return shard_; }
  int64_t steps() const { return steps_; }
  void set_steps(int64_t s) { steps_ = s; }
  torch::Tensor m() const;  ///< first moment, float32 [shard.size], on the device
  torch::Tensor v() const;  ///< second moment, float32 [shard.size], on the device
  bool uses_kokkos() const { return kokkos_; }
  /// Bytes of optimizer state held by this rank (m and v).
  int64_t state_bytes() const { return 2 * shard_.size * static_cast<int64_t>(sizeof(float)); }

 private:
  struct State;
  Shard shard_;
  bool kokkos_;
  int64_t steps_ = 0;
  std::unique_ptr<State> st_;
};

/// lr at a point of training measured in samples seen: linear warm-up over
/// `warmup` samples, then cosine decay from `peak` to `floor` at `total`.
double schedule_lr(double samples_seen, double warmup, double total, double peak, double floor);

}  // namespace vitkd
