#pragma once
// A loader batch as the tensors a model reads.
#include <torch/torch.h>

#include "data/transforms/transforms.hpp"
#include "data/dataset.hpp"
#include "data/loader.hpp"

namespace vitkd {

/// Normalized (and, with `aug` enabled, augmented) input float32 [n, C, S, S]
/// (S = output_side(aug, H), the model's image size):
/// (pixel/255 - mean[c]) / std[c]. The augmentation is a pure function of
/// (aug.seed, batch epoch, sample index). `pinned`: in page-locked host
/// memory (needs CUDA LibTorch), so that a non-blocking copy to a GPU
/// overlaps the host's next work.
torch::Tensor batch_input(const Batch& b, const DatasetMeta& m, const AugmentSpec& aug, bool pinned = false);
// How a training batch's input leaves the host (data.transfer, InputTransfer
// in config/choices.hpp, resolved: Float32 or Uint8): normalized float32, or
// the views' grey levels as uint8 (a quarter of the bytes), normalized where
// the model runs by normalize_grey_levels().

/// A training batch as tensors: the input x float32 [n, C, S, S] (uint8 grey
/// levels with InputTransfer::Uint8), and the
/// targets y: the labels int64 [n], or with mixing the mixed labels float32
/// [n, K] (lam * onehot(y) + (1 - lam) * onehot(y_partner); rows sum to 1).
struct TrainInputs {
  torch::Tensor x, y;
};
/// The whole training transform of `b` (transform_batch): views from `views`
/// / `partner_views` when given (a teacher-view cache's, [b.size()] each),
/// else drawn from (aug.seed, epoch, index).
TrainInputs train_inputs(const Batch& b, const DatasetMeta& m, const AugmentSpec& aug, const ViewParams* views,
                         const ViewParams* partner_views, bool pinned = false,
                         InputTransfer transfer = InputTransfer::Float32);

/// The grey levels `x8` uint8 [n, C, S, S] normalized through `table` float32
/// [C, 256] (normalization_table(), on x8's device): float32 [n, C, S, S],
/// table[c][x8[n][c][y][x]] -- the bits the float32 transfer sends for the
/// same grey levels.
torch::Tensor normalize_grey_levels(const torch::Tensor& x8, const torch::Tensor& table);
/// normalization_table() of the dataset's channels as a tensor [C, 256].
torch::Tensor normalization_table_tensor(const DatasetMeta& m);

/// The training transform of `b` into b.x / b.y_soft on a loader thread
/// (LoaderOptions::transform; Kokkos::Serial); train_inputs() then copies
/// them into the tensors.
void transform_on_loader_thread(Batch& b, const DatasetMeta& m, const AugmentSpec& aug,
                                InputTransfer transfer = InputTransfer::Float32);

/// Labels int64 [n] (`pinned` as for batch_input).
torch::Tensor batch_labels(const Batch& b, bool pinned = false);

}  // namespace vitkd
