#pragma once
// Fused AdamW over one shard of the flat buffers. The moments m and v exist
// for the shard only (ZeRO stage 1) and live on the buffers' device.
//
// Three implementations of the same update, chosen by where the memory is
// (optim/adamw_kernels.hpp has the Kokkos ones):
//  * host memory: one Kokkos kernel over the tensors' memory (unmanaged
//    views, no copies; "AdamW::step", "AdamW::grad_sq_norm");
//  * device memory, with a Kokkos built with CUDA: the same kernel on the
//    device, one pass over memory for m, v and the update, on LibTorch's
//    compute stream ("AdamW::step_device", "AdamW::grad_sq_norm_device");
//  * device memory otherwise: LibTorch's fused AdamW (LibTorch 2.4+: one
//    pass over memory per group with and without weight decay), or before
//    2.4 its element-wise kernels, the same arithmetic in the same order.
// On a device the clip scale, the skip decision and the step count stay on
// the device (StepGate). AdamWKernel::Tensor forces the last on the CPU
// too, which is how the tests compare the device arithmetic with the host
// kernel; the GPU tests compare the Kokkos device kernel with it.
#include <torch/torch.h>

#include <cstdint>
#include <memory>

#include "optim/flat_params.hpp"

namespace vitkd {

/// One step's clipping and skipping, decided from the global gradient norm
/// where the gradients are (0-dim tensors on the buffers' device), so that a
/// step on a GPU never waits for the host to read the norm.
struct StepGate {
  torch::Tensor scale;  ///< float32: the gradients' multiplier, clip / (norm + 1e-6) when norm > clip, else 1
  torch::Tensor apply;  ///< bool: false when the norm is not finite (the update is skipped)
};

/// The gate for global gradient norm `norm` (0-dim float64) and clip
/// threshold `clip` (<= 0: no clipping). The one formula of clipping.
StepGate clip_gate(const torch::Tensor& norm, double clip);

struct AdamWHyper {
  double lr = 1e-3;
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
  double weight_decay = 0.05;  ///< decoupled: p -= lr * wd * p where the mask is 1
};

/// Which implementation runs the update (see the file comment).
enum class AdamWKernel {
  Auto,          ///< Kokkos on host memory; on a device Kokkos where it has CUDA, else tensor kernels
  Kokkos,        ///< the Kokkos host kernel (host memory only)
  Tensor,        ///< LibTorch element-wise kernels (any device)
  KokkosDevice,  ///< the Kokkos device kernel (CUDA memory, a Kokkos with CUDA)
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
  /// The same sum as a 0-dim float64 tensor on the device, without waiting.
  torch::Tensor grad_sq_norm_tensor(const torch::Tensor& grad) const;
  /// One update. `param`, `grad`, `mask`: [shard.size] float32 on the
  /// device (the shard's part of the flat buffers); gradients are multiplied
  /// by `grad_scale` first (clipping). Increments the step count used for
  /// bias correction.
  void step(torch::Tensor param, const torch::Tensor& grad, const torch::Tensor& mask, float grad_scale,
            const AdamWHyper& h);
  /// One update gated by `gate` (see StepGate): with gate.apply false the
  /// parameters, the moments and the step count stay as they are. The
  /// device implementation decides on the device (the step count lives
  /// there too) and never waits; the host kernel reads the gate. LibTorch's
  /// fused kernel leaves the scaled gradient in `grad` (the caller zeroes it
  /// after the step anyway).
  void step(torch::Tensor param, const torch::Tensor& grad, const torch::Tensor& mask, const StepGate& gate,
            const AdamWHyper& h);

  const Shard& shard() const { return shard_; }
  /// Updates applied so far (bias correction); reading it waits for the
  /// device where the count lives there.
  int64_t steps() const;
  void set_steps(int64_t s);
  torch::Tensor m() const;  ///< first moment, float32 [shard.size], on the device
  torch::Tensor v() const;  ///< second moment, float32 [shard.size], on the device
  bool uses_kokkos() const { return kokkos_; }  ///< the Kokkos host kernel
  bool uses_kokkos_device() const { return device_kokkos_; }
  /// Whether this build's Kokkos has CUDA (AdamWKernel::KokkosDevice possible).
  static bool kokkos_device_built();
  /// Bytes of optimizer state held by this rank (m and v).
  int64_t state_bytes() const { return 2 * shard_.size * static_cast<int64_t>(sizeof(float)); }

 private:
  bool fused_fits(const torch::Tensor& mask);
  void fused_step(torch::Tensor& param, const torch::Tensor& grad, const StepGate& gate, const AdamWHyper& h);
  struct State;
  Shard shard_;
  bool kokkos_;
  bool device_kokkos_ = false;
  int64_t steps_ = 0;
  std::unique_ptr<State> st_;
};

/// lr at a point of training measured in samples seen: linear warm-up over
/// `warmup` samples, then cosine decay from `peak` to `floor` at `total`.
double schedule_lr(double samples_seen, double warmup, double total, double peak, double floor);

}  // namespace vitkd
