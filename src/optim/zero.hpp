#pragma once
// ZeRO stage 1: the optimizer step over sharded state. In the same order on
// every rank:
//   1. backward, with bucketed reduce-scatters of the gradients (averaged)
//      started from autograd hooks as buckets complete (optim/buckets.hpp)
//   2. wait for the reduce-scatters
//   3. global gradient norm: the shard's squared norm, one allreduce
//   4. clip (a scale folded into the update)
//   5. fused AdamW on this rank's shard (Kokkos)
//   6. all-gather of the updated parameters: fp32, or with a compute copy
//      (enable_compute_copy) the bf16 copy plus the few fp32 elements the
//      forward pass does not read from it (optim/compute_copy.hpp)
// With BucketOptions::sharded = false it is plain data parallelism instead
// (the baseline ZeRO-1 replaces): one allreduce of the whole gradient buffer,
// the full AdamW state and update on every rank, no all-gather.
#include <memory>

#include "optim/buckets.hpp"
#include "optim/compute_copy.hpp"
#include "comm/comm.hpp"
#include "optim/adamw.hpp"
#include "optim/flat_params.hpp"
#include "util/timing.hpp"

namespace vitkd {

/// Training-state bytes one rank holds, read from the buffers themselves.
struct MemoryFootprint {
  int64_t parameters = 0;  ///< flat fp32 parameter buffer (padded)
  int64_t gradients = 0;   ///< flat fp32 gradient buffer, plus the reduced shard when sharded
  int64_t optimizer = 0;   ///< AdamW moments m and v (of the shard when sharded)
  int64_t compute_copy = 0;  ///< the bf16 copy of the parameters and its fp32 side buffer (precision.gather)
  int64_t total() const { return parameters + gradients + optimizer + compute_copy; }
};

class ShardedAdamW {
 public:
  ShardedAdamW(FlatParams& flat, torch::nn::Module& module, Communicator& comm, int rank,
               const BucketOptions& buckets = BucketOptions());

  /// Call right before backward (arms the gradient buckets).
  void begin_backward();
  /// Steps 2-6 above; returns the global gradient norm (before clipping).
  /// A non-finite norm skips the update on every rank (parameters unchanged).
  /// `clip` <= 0 disables clipping. Phases are timed into `times` if given.
  /// Reading the norm waits for the device.
  double step(const AdamWHyper& h, double clip, PhaseTimes* times = nullptr);
  /// The same step; the norm is a 0-dim float64 tensor on the buffers'
  /// device. On a GPU the host does not wait for it: the norm, the clip
  /// scale and the skip decision stay on the device (StepGate), and so does
  /// the all-reduce of the squared norm where the backend can do it there
  /// (NCCL; one rank needs none). MPI sums it through host memory, which
  /// waits for the gradients.
  torch::Tensor step_async(const AdamWHyper& h, double clip, PhaseTimes* times = nullptr);

  /// From now on step 6 gathers the parameters in bf16 into a copy the
  /// forward pass reads for `operands` (ViTImpl::matrix_operands); the
  /// unsharded step recasts its whole buffer instead. Returns the copies
  /// for the model (ViTImpl::use_compute_weights).
  const ComputeWeights& enable_compute_copy(const std::vector<torch::Tensor>& operands);
  /// The parameters changed outside a step (a checkpoint loaded): the
  /// compute copy made again. Nothing without one.
  void parameters_changed();
  /// Every rank's fp32 parameters made whole again (a compute copy leaves
  /// the other shards' operands stale in fp32); before a checkpoint is
  /// written. Collective; nothing without a compute copy or sharding.
  void gather_fp32(PhaseTimes* times = nullptr);
  /// Bytes a rank hands to step 6's all-gathers per step, the mean over
  /// ranks (0 unsharded).
  int64_t all_gather_bytes() const;
  bool has_compute_copy() const { return compute_ != nullptr; }

  AdamW& adamw() { return opt_; }
  const Shard& shard() const { return shard_; }
  /// Gradient buckets (sharded mode only).
  const GradBuckets& buckets() const { return *buckets_; }
  int64_t bucket_count() const;
  /// Optimizer-state bytes on this rank (AdamW moments of the shard).
  int64_t state_bytes() const { return opt_.state_bytes(); }
  /// Every training buffer this rank holds (the one formula for logs,
  /// timing.h5 and result.json).
  MemoryFootprint memory() const;
  bool sharded() const { return sharded_; }

 private:
  FlatParams& flat_;
  Communicator& comm_;
  bool sharded_;
  int rank_;
  Shard shard_;
  AdamW opt_;
  torch::Tensor grad_shard_;  ///< fp32 [shard.size]: the averaged gradient of this shard
  std::unique_ptr<GradBuckets> buckets_;
  std::unique_ptr<ComputeCopy> compute_;
};

}  // namespace vitkd
