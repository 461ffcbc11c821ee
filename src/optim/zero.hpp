#pragma once
// ZeRO stage 1: the optimizer step over sharded state. After backward, in the
// same order on every rank:
//   1. reduce-scatter of the flat gradient buffer with averaging
//   2. global gradient norm: the shard's squared norm, one allreduce
//   3. clip (a scale folded into the update)
//   4. fused AdamW on this rank's shard
//   5. all-gather of the updated parameters
#include <memory>

#include "dist/comm.hpp"
#include "optim/adamw.hpp"
#include "optim/flat_params.hpp"
#include "train/timing.hpp"

namespace vitkd {

class ShardedAdamW {
 public:
  ShardedAdamW(FlatParams& flat, Communicator& comm, int rank);

  /// One optimizer step; returns the global gradient norm (before clipping).
  /// A non-finite norm skips the update (parameters unchanged) and returns it.
  /// `clip` <= 0 disables clipping. Phases are timed into `times` if given.
  double step(const AdamWHyper& h, double clip, PhaseTimes* times = nullptr);

  AdamW& adamw() { return opt_; }
  const Shard& shard() const { return shard_; }
  /// Optimizer-state bytes on this rank (AdamW moments of the shard).
  int64_t state_bytes() const { return opt_.state_bytes(); }

 private:
  FlatParams& flat_;
  Communicator& comm_;
  Shard shard_;
  AdamW opt_;
  torch::Tensor grad_shard_;  ///< fp32 [shard.size]: the averaged gradient of this shard
};

}  // namespace vitkd
