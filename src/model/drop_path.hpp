#pragma once
// Stochastic depth (timm's DropPath with drop_path_rate): in a training
// forward, each residual branch (attention, MLP) of block i is dropped for a
// whole sample with probability rate_i = drop_path * i / (depth - 1), linear
// over depth as timm's torch.linspace(0, drop_path_rate, depth), and a kept
// branch is scaled by 1 / (1 - rate_i). Block 0 never drops.
//
// Keyed randomness: whether a sample keeps a branch is a pure function of
// (seed, epoch, the sample's index in the split, block, branch), as the
// augmentation's views are (data/augment.hpp), so that the run is the same on
// any number of ranks and a resumed run continues bit for bit.
#include <torch/types.h>

#include <cstdint>
#include <vector>

namespace vitkd {

/// The two residual branches of a block.
enum class DropBranch : uint64_t { Attention = 0, Mlp = 1 };

struct DropPathSpec {
  double rate = 0;    ///< model.drop_path in [0, 1); 0 = off
  uint64_t seed = 0;  ///< run.seed
  bool enabled() const { return rate > 0; }
};

/// rate_i of block `block` (0-based) of `depth`: rate * block / (depth - 1);
/// 0 for a model of one block.
double drop_path_block_rate(double rate, int64_t block, int64_t depth);

/// Whether sample `index` keeps `branch` of `block` in `epoch`, with keep
/// probability `keep` in (0, 1]: a pure function of its arguments (keep = 1
/// always keeps).
bool drop_path_keeps(uint64_t seed, int64_t epoch, int64_t index, int64_t block, DropBranch branch, double keep);

/// Per-block, per-sample factors of one training forward: attn[i] and mlp[i]
/// are float32 [B,1,1] holding 0 (dropped) or 1 / keep_i (kept), on the model's
/// device; undefined for a block that never drops (rate_i = 0). Empty when
/// the spec is off.
struct DropPathScales {
  std::vector<torch::Tensor> attn, mlp;
  bool empty() const { return attn.empty(); }
};

/// The scales for the samples `indices` (int64 [B] on the host: their indices
/// in the training split) of `epoch`, for a model of `depth` blocks.
DropPathScales drop_path_scales(const DropPathSpec& spec, int64_t depth, int64_t epoch, const torch::Tensor& indices,
                                const torch::Device& device);

}  // namespace vitkd
