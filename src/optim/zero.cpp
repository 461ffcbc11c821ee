#include "optim/zero.hpp"

#include <cmath>

#include "dist/world.hpp"

namespace vitkd {

ShardedAdamW::ShardedAdamW(FlatParams& flat, torch::nn::Module& module, Communicator& comm,
                           int rank, const BucketOptions& bopt)
    : flat_(flat), comm_(comm), shard_(flat.shard(rank)), opt_(shard_),
      grad_shard_(torch::zeros({shard_.size}, torch::kFloat32)) {
  buckets_ = std::make_unique<GradBuckets>(flat, module, comm, rank, grad_shard_.data_ptr<float>(), bopt);
  buckets_->begin();
}

double ShardedAdamW::step(const AdamWHyper& h, double clip, PhaseTimes* times) {
  auto timed = [&](Phase p, auto&& fn) {
    const auto t0 = Clock::now();
    fn();
    if (times) times->add(p, seconds_since(t0));
  };
  float* grad = grad_shard_.data_ptr<float>();
  timed(Phase::CommWait, [&] { buckets_->finish(); });
  double norm = 0;
  timed(Phase::Optimizer, [&] {
    norm = std::sqrt(allreduce_sum(opt_.grad_sq_norm(grad)));
    if (!std::isfinite(norm)) return;
    const float scale = (clip > 0 && norm > clip) ? static_cast<float>(clip / (norm + 1e-6)) : 1.0f;
    opt_.step(flat_.params.data_ptr<float>() + shard_.offset, grad,
              flat_.decay_mask.data_ptr<float>() + shard_.offset, scale, h);
  });
  if (!std::isfinite(norm)) return norm;  // every rank saw the same norm: all skip
  timed(Phase::AllGather, [&] { comm_.all_gather(flat_.params.data_ptr<float>(), shard_.size); });
  return norm;
}

}  // namespace vitkd
