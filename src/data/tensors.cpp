#include "data/tensors.hpp"

#include <algorithm>

namespace vitkd {

torch::Tensor batch_input(const Batch& b, const DatasetMeta& m, const AugmentSpec& aug, bool pinned) {
  const int64_t oh = aug.out > 0 ? aug.out : m.height, ow = aug.out > 0 ? aug.out : m.width;
  auto x = torch::empty({b.size(), m.channels, oh, ow},
                        torch::TensorOptions().dtype(torch::kFloat32).pinned_memory(pinned));
  if (b.size() > 0)
    normalize_augment(b.pixels.data(), b.indices.data(), b.size(), m.height, m.width, m.channels,
                      m.mean, m.std, aug, b.epoch, x.data_ptr<float>());
  return x;
}

TrainInputs train_inputs(const Batch& b, const DatasetMeta& m, const AugmentSpec& aug, const ViewParams* views,
                         const ViewParams* partner_views, bool pinned, InputTransfer transfer) {
  const int64_t s = output_side(aug, m.height);
  const auto opt = torch::TensorOptions().dtype(torch::kFloat32).pinned_memory(pinned);
  TrainInputs t;
  if (transfer == InputTransfer::Uint8) {
    t.x = torch::empty({b.size(), m.channels, s, aug.out > 0 ? s : m.width}, opt.dtype(torch::kUInt8));
    t.y = batch_labels(b, pinned);
    if (b.transformed && !views) {  // a loader thread did the work
      std::copy(b.x8.begin(), b.x8.end(), t.x.data_ptr<uint8_t>());
    } else if (b.size() > 0) {
      transform_batch(b.images(m), aug, views, t.x.data_ptr<uint8_t>());
    }
    return t;
  }
  t.x = torch::empty({b.size(), m.channels, s, aug.out > 0 ? s : m.width}, opt);
  if (b.transformed && !views) {  // a loader thread did the work
    std::copy(b.x.begin(), b.x.end(), t.x.data_ptr<float>());
    if (!aug.mixing()) {
      t.y = batch_labels(b, pinned);
    } else {
      t.y = torch::empty({b.size(), m.num_classes}, opt);
      std::copy(b.y_soft.begin(), b.y_soft.end(), t.y.data_ptr<float>());
    }
    return t;
  }
  if (!aug.mixing()) {
    t.y = batch_labels(b, pinned);
    if (b.size() > 0)
      transform_batch(b.images(m), aug, m.mean, m.std, views, nullptr, 0, t.x.data_ptr<float>(), nullptr);
    return t;
  }
  t.y = torch::empty({b.size(), m.num_classes}, opt);
  if (b.size() > 0)
    transform_batch(b.images(m), aug, m.mean, m.std, views, partner_views, m.num_classes, t.x.data_ptr<float>(),
                    t.y.data_ptr<float>());
  return t;
}

void transform_on_loader_thread(Batch& b, const DatasetMeta& m, const AugmentSpec& aug, InputTransfer transfer) {
  const int64_t s = output_side(aug, m.height), w = aug.out > 0 ? s : m.width;
  if (transfer == InputTransfer::Uint8) {
    b.x8.resize(static_cast<size_t>(b.size() * m.channels * s * w));
    ImageBatch ib = b.images(m);
    ib.serial = true;
    if (b.size() > 0) transform_batch(ib, aug, nullptr, b.x8.data());
    b.transformed = true;
    return;
  }
  b.x.resize(static_cast<size_t>(b.size() * m.channels * s * w));
  if (aug.mixing()) b.y_soft.resize(static_cast<size_t>(b.size() * m.num_classes));
  ImageBatch ib = b.images(m);
  ib.serial = true;
  if (b.size() > 0)
    transform_batch(ib, aug, m.mean, m.std, nullptr, nullptr, m.num_classes, b.x.data(),
                    aug.mixing() ? b.y_soft.data() : nullptr);
  b.transformed = true;
}

torch::Tensor normalize_grey_levels(const torch::Tensor& x8, const torch::Tensor& table) {
  // One gather: the row of each pixel's channel, the column of its grey level.
  const int64_t c = table.size(0);
  auto rows = torch::arange(c, x8.options().dtype(torch::kLong)).mul_(256).view({1, c, 1, 1});
  return table.reshape({-1}).take(x8.to(torch::kLong).add_(rows));
}

torch::Tensor normalization_table_tensor(const DatasetMeta& m) {
  std::vector<float> t = normalization_table(m.channels, m.mean, m.std);
  return torch::tensor(t, torch::kFloat32).view({m.channels, 256});
}

torch::Tensor batch_labels(const Batch& b, bool pinned) {
  auto y = torch::empty({b.size()}, torch::TensorOptions().dtype(torch::kLong).pinned_memory(pinned));
  y.copy_(torch::from_blob(const_cast<int32_t*>(b.labels.data()), {b.size()}, torch::kInt32));
  return y;
}

}  // namespace vitkd
