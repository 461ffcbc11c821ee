#pragma once
// The parameters in the compute precision, made where ZeRO-1 gathers them
// (precision.gather, bf16 runs).
//
// After the sharded AdamW step each rank owns the new fp32 values of its
// shard only. Instead of all-gathering them in fp32, the rank casts its
// shard to bf16 and the ranks all-gather that bf16 copy: half the bytes.
// The forward pass reads the matrix products' operands from the copy
// (optim/compute_weights.hpp), so nothing casts a weight in forward or
// backward. The parameters it does not read as operands (norms, tokens, the
// position embedding, the biases added in fp32: ViTImpl::matrix_operands)
// keep their fp32 values on every rank
// through a second, small fp32 all-gather of just those elements.
//
// Layout: `compute` is bf16 [padded], element i the bf16 of flat.params[i]
// (FlatParams' layout). The fp32 elements travel as `side` fp32 [n], n the
// count of elements that are no operand, in flat order: rank r's block (those
// in its shard) after those of ranks 0..r-1 (an all-gather of uneven blocks).
//
// On ranks other than a shard's owner the fp32 values of that shard's
// operands go stale between steps; gather_fp32() (before a checkpoint is
// written) makes the whole fp32 buffer current again.
#include <torch/torch.h>

#include <cstdint>
#include <vector>

#include "comm/comm.hpp"
#include "optim/compute_weights.hpp"
#include "optim/flat_params.hpp"

namespace vitkd {

class ComputeCopy {
 public:
  /// `operands`: parameters (views into flat.params) the forward pass reads
  /// through weights(). Makes the copy of all of flat.params.
  ComputeCopy(FlatParams& flat, const std::vector<torch::Tensor>& operands);

  /// The copies for the model (ViTImpl::use_compute_weights).
  const ComputeWeights& weights() const { return weights_; }
  /// Casts all of flat.params again (after the parameters changed outside a
  /// step: a checkpoint loaded; the unsharded optimizer's step).
  void refresh();
  /// After this rank updated its `shard` (of flat.shard(rank)): the shard's
  /// bf16 copy, the bf16 all-gather, the fp32 all-gather of the elements
  /// that are not operands. Collective.
  void gather(Communicator& comm, const Shard& shard, int rank);
  /// Bytes handed to gather()'s all-gathers per step, the mean over ranks
  /// (a rank hands its shard's fp32 elements, which differ in number).
  double gather_bytes() const;
  /// Bytes of the copy and its buffers on this rank.
  int64_t bytes() const;

 private:
  FlatParams& flat_;
  torch::Tensor compute_;                 ///< bf16 [padded]
  ComputeWeights weights_;
  std::vector<int64_t> side_counts_;      ///< per rank: its shard's elements that are no operand
  std::vector<int64_t> side_at_;          ///< per rank: where its block starts in side_
  torch::Tensor side_index_;              ///< int64 [n]: the flat positions of side_'s elements
  torch::Tensor side_;                    ///< fp32 [n]
};

}  // namespace vitkd
