#include "train/inputs.hpp"

#include <vector>

#include "train/setup.hpp"

namespace vitkd {

TrainInputs training_inputs(TrainSetup& s, const Batch& b, bool pinned) {
  const AugmentSpec& aug = s.plan.augment;
  if (!s.views) return train_inputs(b, s.meta, aug, nullptr, nullptr, pinned, s.plan.transfer);
  const std::vector<ViewParams> v = s.views->views(b.epoch, b.indices);
  std::vector<ViewParams> pv;
  if (aug.mixing()) pv = s.views->views(b.epoch, b.partner_indices);
  return train_inputs(b, s.meta, aug, v.data(), aug.mixing() ? pv.data() : nullptr, pinned, s.plan.transfer);
}

TrainInputs device_inputs(TrainSetup& s, const Batch& b, int64_t* host_bytes) {
  const bool gpu = s.plan.device.is_cuda();
  // From page-locked memory on a GPU, so the copy does not wait on the host.
  TrainInputs in = training_inputs(s, b, /*pinned=*/gpu);
  if (host_bytes) *host_bytes = static_cast<int64_t>(in.x.nbytes() + in.y.nbytes());
  in.x = in.x.to(s.plan.device, /*non_blocking=*/gpu);
  in.y = in.y.to(s.plan.device, /*non_blocking=*/gpu);
  if (s.plan.transfer == InputTransfer::Uint8) in.x = normalize_grey_levels(in.x, s.grey_levels);
  return in;
}

}  // namespace vitkd
