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
                         const ViewParams* partner_views, bool pinned) {
  const int64_t s = output_side(aug, m.height);
  const auto opt = torch::TensorOptions().dtype(torch::kFloat32).pinned_memory(pinned);
  TrainInputs t;
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

void transform_on_loader_thread(Batch& b, const DatasetMeta& m, const AugmentSpec& aug) {
  const int64_t s = output_side(aug, m.height), w = aug.out > 0 ? s : m.width;
  b.x.resize(static_cast<size_t>(b.size() * m.channels * s * w));
  if (aug.mixing()) b.y_soft.resize(static_cast<size_t>(b.size() * m.num_classes));
  ImageBatch ib = b.images(m);
  ib.serial = true;
  if (b.size() > 0)
    transform_batch(ib, aug, m.mean, m.std, nullptr, nullptr, m.num_classes, b.x.data(),
                    aug.mixing() ? b.y_soft.data() : nullptr);
  b.transformed = true;
}

torch::Tensor batch_labels(const Batch& b, bool pinned) {
  auto y = torch::empty({b.size()}, torch::TensorOptions().dtype(torch::kLong).pinned_memory(pinned));
  y.copy_(torch::from_blob(const_cast<int32_t*>(b.labels.data()), {b.size()}, torch::kInt32));
  return y;
}

}  // namespace vitkd
